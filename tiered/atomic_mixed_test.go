package tiered_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// mixedStore returns a Store on the rig's database in the atomic mode or
// the standard one, with a SQL timeout shorter than its wait — on SQLite
// longer than the owner's execution: a claim there waits for the one
// writer as every write does, bounded by the DSN's busy timeout and the
// SQL timeout.
func (r *atomicRig) mixedStore(t *testing.T, atomic bool) *tiered.Store {
	t.Helper()
	sqlTimeout := time.Second
	if strings.HasPrefix(r.st.SQL.Kind, "sqlite") {
		sqlTimeout = 5 * time.Second
	}
	opts := []tiered.Option{tiered.WithSQL(r.st.SQLLayer(t)), tiered.WithAtomic(atomic),
		tiered.WithTimeouts(2*time.Second, sqlTimeout), tiered.WithWait(10 * time.Second)}
	if r.redis {
		opts = append(opts, tiered.WithRedis(r.st.RedisLayer(t)))
	}
	return newStore(t, opts...)
}

// The modes on one table (a rollout, two services sharing it): a
// duplicate waits for the owner, whatever mode each side is in, bounded
// by its own Store's wait, and replays the owner's answer — also when the
// owner outlasts the duplicate's SQL timeout. A standard-mode claim used
// to block on the atomic owner's open transaction until that timeout, and
// answer 503. (On SQLite the duplicate's claim waits for the one writer,
// which the atomic owner holds, under its SQL timeout: see mixedStore.)
func TestAtomicMixedModesReplay(t *testing.T) {
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		for _, tc := range []struct {
			name       string
			owner, dup bool // atomic
		}{
			{name: "atomic owner, standard duplicate", owner: true, dup: false},
			{name: "standard owner, atomic duplicate", owner: false, dup: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				owner, dup := r.mixedStore(t, tc.owner), r.mixedStore(t, tc.dup)
				key := newKey(t)
				id := key.String()
				started := make(chan struct{})
				held := doOn(t.Context(), owner, key, func(ctx context.Context) ([]byte, error) {
					if tc.owner {
						if err := r.charge(ctx, id); err != nil {
							return nil, err
						}
					}
					close(started)
					// Past the duplicate's SQL timeout, within its wait.
					time.Sleep(2500 * time.Millisecond)
					return []byte("owner"), nil
				})
				<-started
				res, err := dup.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
					return []byte("duplicate"), nil
				})
				o := within(t, held, "the owner")
				if o.err != nil || string(o.res.Value) != "owner" {
					t.Fatalf("owner: %v", o)
				}
				if err != nil || string(res.Value) != "owner" || !res.Replayed {
					t.Fatalf("duplicate: %+v, %v; want the replay of the owner's answer", res, err)
				}
				if tc.owner {
					if n := r.rows(t, id); n != 1 {
						t.Fatalf("ledger rows: %d, want 1", n)
					}
				}
			})
		}
	})
}

// The same behind the HTTP middleware: the duplicate request, on a Store
// of the other mode, gets the owner's response, byte for byte, and the
// handler runs once.
func TestAtomicMixedModesBehindTheMiddleware(t *testing.T) {
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		for _, ownerAtomic := range []bool{true, false} {
			t.Run(fmt.Sprintf("atomic owner %v", ownerAtomic), func(t *testing.T) {
				var runs atomic.Int64
				started := make(chan struct{}, 1)
				handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					n := runs.Add(1)
					id := req.Header.Get("Idempotency-Key")
					if _, ok := sqllayer.TxFrom(req.Context()); ok {
						if err := r.charge(req.Context(), id); err != nil {
							http.Error(w, err.Error(), http.StatusConflict)
							return
						}
					}
					started <- struct{}{}
					time.Sleep(2500 * time.Millisecond) // past the duplicate's SQL timeout
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusCreated)
					_, _ = fmt.Fprintf(w, `{"charge":%q,"run":%d}`, id, n)
				})
				serve := func(s *tiered.Store, id string) *httptest.ResponseRecorder {
					mw, err := middleware.New(s, middleware.WithSingleTenant())
					if err != nil {
						t.Error(err)
						return httptest.NewRecorder()
					}
					req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
					req.Header.Set("Idempotency-Key", id)
					rec := httptest.NewRecorder()
					mw(handler).ServeHTTP(rec, req)
					return rec
				}
				owner, dup := r.mixedStore(t, ownerAtomic), r.mixedStore(t, !ownerAtomic)
				id := "mixed-" + newKey(t).String()[:16]
				first := make(chan *httptest.ResponseRecorder, 1)
				go func() { first <- serve(owner, id) }()
				<-started
				second := serve(dup, id)
				got := within(t, first, "the owner's response")
				if got.Code != http.StatusCreated || second.Code != http.StatusCreated || got.Body.String() != second.Body.String() {
					t.Fatalf("owner %d %s, duplicate %d %s: want one 201, twice", got.Code, got.Body, second.Code, second.Body)
				}
				if runs.Load() != 1 {
					t.Fatalf("the handler ran %d times, want once", runs.Load())
				}
				if ownerAtomic {
					if n := r.rows(t, id); n != 1 {
						t.Fatalf("ledger rows: %d, want 1", n)
					}
				}
			})
		}
	})
}
