package idemtest_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemtest"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A chi service checks its stack from a test of its own: Mount builds the
// router as the service does, with the kit's handler on every route. Gin
// mounts with r.Use(mw) and r.Any("/*path", gin.WrapH(h)), Echo with
// e.Use(mw) and e.Any("/*", echo.WrapHandler(h)). Tiers over the service's
// own Redis and database check those too.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestIdempotency(t *testing.T)
		idemtest.Run(t, idemtest.Stack{
			Tiers: idemtest.Memory(t),
			Mount: func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
				mw, err := middleware.New(store, opts...)
				if err != nil {
					return nil, err
				}
				r := chi.NewRouter()
				r.Use(chimw.Recoverer, mw)
				r.Handle("/*", h)
				return r, nil
			},
		})
	}
}

// Tiers over the service's own test Redis and database run the kit against
// the Store as it runs in production. Each instance a row starts gets
// layers of its own over the shared client and pool; the records are
// shared, as between service instances.
func ExampleTiers() {
	var rdb *redis.Client // the test Redis
	var db *bun.DB        // the test database, its tables created by sqllayer's Init
	tiers := func(t testing.TB) (idem.Layer, idem.Layer) {
		red, err := redislayer.New(rdb, redislayer.WithPrefix("idemtest:"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = red.Close() })
		sql, err := sqllayer.New(db)
		if err != nil {
			t.Fatal(err)
		}
		return red, sql
	}
	_ = idemtest.Stack{Tiers: tiers /* , Mount: … */}
}
