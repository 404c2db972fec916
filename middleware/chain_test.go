package middleware_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// later turns the rig's later function into net/http middleware.
func later(fn func(http.ResponseWriter, *http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fn(w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

func TestChainNetHTTP(t *testing.T) {
	behaviour.RunChain(t, func(store *tiered.Store, opts []middleware.Option, fn func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		return mw(later(fn)(h)), nil
	})
}

func TestChainChi(t *testing.T) {
	behaviour.RunChain(t, func(store *tiered.Store, opts []middleware.Option, fn func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		r := chi.NewRouter()
		r.Use(chimw.Recoverer, mw, later(fn))
		r.Handle("/*", h)
		return r, nil
	})
}
