package middleware_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
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

// The same rows with the handler's transaction a *sql.Tx, as sqlc's
// database/sql mode, sqlx and gorm hold one: on pgx's stdlib driver, on
// MariaDB and on SQLite.
func TestReservationSQLTx(t *testing.T) {
	each := func(t *testing.T, fn func(t *testing.T, st *stacktest.Stack)) {
		t.Run("postgres", func(t *testing.T) {
			fn(t, stacktest.On(t, "postgres", testenv.AnyRedis(t), testenv.Postgres(t)))
		})
		t.Run("mysql", func(t *testing.T) {
			fn(t, stacktest.On(t, "mysql", testenv.AnyRedis(t), testenv.MySQL(t)))
		})
		t.Run("sqlite", func(t *testing.T) {
			fn(t, stacktest.On(t, "sqlite", testenv.MiniRedis(t), testenv.SQLiteFile(t)))
		})
	}
	behaviour.RunReservationWith(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := middleware.New(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve(r.Context(), w, strings.TrimPrefix(r.URL.Path, "/charge/"))
		})), nil
	}, behaviour.SQLTx, each)
}
