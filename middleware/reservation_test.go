package middleware_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// A net/http handler reads its reservation from r.Context() and completes
// it in its own transaction.
func TestReservationNetHTTP(t *testing.T) {
	behaviour.RunReservation(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := middleware.New(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /charge/{id}", func(w http.ResponseWriter, r *http.Request) {
			serve(r.Context(), w, r.PathValue("id"))
		})
		return mw(mux), nil
	})
}

// The same behind chi, with the id from chi's URL parameters.
func TestReservationChi(t *testing.T) {
	behaviour.RunReservation(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := middleware.New(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		r := chi.NewRouter()
		r.Use(mw)
		r.Post("/charge/{id}", func(w http.ResponseWriter, r *http.Request) {
			serve(r.Context(), w, chi.URLParam(r, "id"))
		})
		return r, nil
	})
}
