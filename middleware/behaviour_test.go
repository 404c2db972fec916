package middleware_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemtest"
	"github.com/idemkit/idem/tiered"
)

// netHTTP mounts the middleware as plain net/http does. The kit's chain
// rows put their later middleware in front of h, which is net/http's own
// way of chaining.
func netHTTP(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
	mw, err := middleware.New(store, opts...)
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}

// later turns the kit's later function into net/http middleware.
func later(fn func(http.ResponseWriter, *http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fn(w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// chiStack mounts the middleware on a chi router, after the given
// middlewares (chi's Recoverer, or none).
func chiStack(before ...func(http.Handler) http.Handler) idemtest.Stack {
	chain := func(store *tiered.Store, opts []middleware.Option, fn func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		r := chi.NewRouter()
		r.Use(before...)
		r.Use(mw)
		if fn != nil {
			r.Use(later(fn))
		}
		r.Handle("/*", h)
		return r, nil
	}
	return idemtest.Stack{
		Mount: func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
			return chain(store, opts, nil, h)
		},
		Chain: chain,
	}
}

func TestBehaviourNetHTTP(t *testing.T) {
	behaviour.Run(t, idemtest.Stack{Mount: netHTTP})
}

// TestBehaviourChi runs the kit on chi with its Recoverer before the
// middleware, as most chi services have it, on every backend.
func TestBehaviourChi(t *testing.T) {
	behaviour.Run(t, chiStack(chimw.Recoverer))
}

// TestBehaviourChiBare runs the kit on chi without a recoverer.
func TestBehaviourChiBare(t *testing.T) {
	s := chiStack()
	s.Tiers = idemtest.Memory(t)
	idemtest.Run(t, s)
}

// Three instances over one Redis and one database: 200 rounds of 20
// identical concurrent POSTs run the handler once per round.
func TestThreeInstances(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	behaviour.RunBurst(t, idemtest.Stack{Mount: netHTTP}, rounds)
}

// TestBehaviourOneTier runs the kit on Stores with one tier: SQL alone
// (the memlayer of unit tests), and Redis deciding alone, the weaker mode
// for dedup that is not about money. Both must answer as the full Store
// does.
func TestBehaviourOneTier(t *testing.T) {
	for _, c := range []struct {
		name       string
		redis, sql bool
	}{
		{"sql only", false, true},
		{"redis only", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := idemtest.Memory(t)
			idemtest.Run(t, idemtest.Stack{
				Mount: netHTTP,
				Tiers: func(t testing.TB) (redis, sql idem.Layer) {
					redis, sql = mem(t)
					if !c.redis {
						redis = nil
					}
					if !c.sql {
						sql = nil
					}
					return redis, sql
				},
			})
		})
	}
}
