package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

var _ tiered.AtomicLayer = (*sqllayer.Layer)(nil)

// atomicRig is an atomic mode's setting: one database (and Redis, or none)
// shared by every Store of a test, and a business table.
type atomicRig struct {
	st     *stacktest.Stack
	redis  bool
	ledger *ledger
}

// eachAtomicRig runs fn on every database (Postgres, MariaDB, SQLite in a
// file and in memory), with Redis in front and without.
func eachAtomicRig(t *testing.T, fn func(t *testing.T, r *atomicRig)) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		for _, redis := range []bool{false, true} {
			name := "sql-only"
			if redis {
				name = "with-redis"
			}
			t.Run(name, func(t *testing.T) {
				rd := testenv.MiniRedis(t)
				if s.Real {
					rd = testenv.AnyRedis(t)
				}
				st := stacktest.On(t, s.Kind, rd, s)
				fn(t, &atomicRig{st: st, redis: redis, ledger: newLedger(t, st)})
			})
		}
	})
}

// store returns an atomic Store over a SQL layer (and Redis layer) of its
// own.
func (r *atomicRig) store(t *testing.T, opts ...tiered.Option) *tiered.Store {
	t.Helper()
	base := []tiered.Option{tiered.WithSQL(r.st.SQLLayer(t)), tiered.WithAtomic(true), tiered.WithTimeouts(2*time.Second, 10*time.Second)}
	if r.redis {
		base = append(base, tiered.WithRedis(r.st.RedisLayer(t)))
	}
	return newStore(t, append(base, opts...)...)
}

// charge is the work of a payment: one row in the ledger, written in the
// execution's transaction.
func (r *atomicRig) charge(ctx context.Context, id string) error {
	tx, ok := sqllayer.TxFrom(ctx)
	if !ok {
		return errors.New("no transaction on the work's context")
	}
	_, err := r.ledger.db.NewRaw("INSERT INTO "+r.ledger.table+" (id, amount) VALUES (?, ?)", id, 100).Conn(tx).Exec(ctx)
	return err
}

// rows counts the ledger's rows of id.
func (r *atomicRig) rows(t *testing.T, id string) int {
	t.Helper()
	var n int
	if err := r.ledger.db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+r.ledger.table+" WHERE id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// atomicEnding is one way an atomic execution can end.
type atomicEnding struct {
	name string
	// fn is the first call's work; charge writes the ledger row.
	fn func(charge func(ctx context.Context) error) tiered.Func
	// what the first caller gets
	value string
	errs  []error
	// committed: the ledger row and the result committed (a retry
	// replays value); else nothing did (a retry runs).
	committed bool
}

func TestAtomicEndings(t *testing.T) {
	rows := []atomicEnding{
		{
			name: "returns a value",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) { return []byte("paid"), charge(ctx) }
			},
			value: "paid", committed: true,
		},
		{
			name: "returns an error after writing",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) {
					if err := charge(ctx); err != nil {
						return nil, err
					}
					return []byte("partial"), errDeclined
				}
			},
			value: "partial", errs: []error{errDeclined},
		},
		{
			name: "panics after writing",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) {
					if err := charge(ctx); err != nil {
						return nil, err
					}
					panic("card processor exploded")
				}
			},
			errs: []error{errPanicked},
		},
		{
			name: "calls runtime.Goexit after writing",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) {
					if err := charge(ctx); err != nil {
						return nil, err
					}
					runtime.Goexit()
					return []byte("unreachable"), nil
				}
			},
			errs: []error{tiered.ErrGoexit},
		},
		{
			name: "completes its reservation itself",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) {
					if err := charge(ctx); err != nil {
						return nil, err
					}
					res, _ := idem.ReservationFrom(ctx)
					tx, _ := sqllayer.TxFrom(ctx)
					l := res.Layer().(*sqllayer.Layer)
					err := l.CompleteReservation(ctx, tx, res, []byte("paid"))
					if !errors.Is(err, idem.ErrConfig) {
						return nil, fmt.Errorf("CompleteReservation in an atomic execution: %v, want idem.ErrConfig", err)
					}
					return []byte("paid"), nil // ignores the refusal: still nothing commits
				}
			},
			value: "paid", errs: []error{idem.ErrConfig},
		},
		{
			name: "returns a result too large to keep",
			fn: func(charge func(context.Context) error) tiered.Func {
				return func(ctx context.Context) ([]byte, error) {
					return []byte(strings.Repeat("x", idem.MaxResult+1)), charge(ctx)
				}
			},
			value: strings.Repeat("x", idem.MaxResult+1), errs: []error{tiered.ErrNotReplayable}, committed: true,
		},
	}
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		a, b := r.store(t), r.store(t, tiered.WithLocalCache(0, 0, 0))
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				key := newKey(t)
				id := key.String()
				var runs atomic.Int64
				charge := func(ctx context.Context) error { runs.Add(1); return r.charge(ctx, id) }
				got := within(t, doOn(t.Context(), a, key, row.fn(charge)), "the first call")
				if got.returned || !errors.Is(got.err, tiered.ErrGoexit) {
					if string(got.res.Value) != row.value {
						t.Errorf("first caller's value %.20q, want %.20q", got.res.Value, row.value)
					}
				}
				if len(row.errs) == 0 && got.err != nil {
					t.Errorf("first caller: %v, want no error", got.err)
				}
				for _, want := range row.errs {
					var pe *tiered.PanicError
					if want == errPanicked && errors.As(got.err, &pe) {
						continue
					}
					if !errors.Is(got.err, want) {
						t.Errorf("first caller: %v, want %v", got.err, want)
					}
				}
				wantRows := 0
				if row.committed {
					wantRows = 1
				}
				if n := r.rows(t, id); n != wantRows {
					t.Fatalf("ledger rows after the first call: %d, want %d", n, wantRows)
				}
				// The retry, on another Store, at once: no lease to wait out.
				retry, err := b.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
					return []byte("retried"), charge(ctx)
				})
				switch {
				case row.committed && row.value == "paid":
					if err != nil || string(retry.Value) != "paid" || !retry.Replayed {
						t.Fatalf("retry: %+v, %v; want the replay of paid", retry, err)
					}
				case row.committed:
					if !errors.Is(err, tiered.ErrNotReplayable) {
						t.Fatalf("retry: %v, want ErrNotReplayable", err)
					}
				default:
					if err != nil || string(retry.Value) != "retried" || retry.Replayed {
						t.Fatalf("retry: %+v, %v; want its own run", retry, err)
					}
				}
				if n := r.rows(t, id); n != 1 {
					t.Fatalf("ledger rows after the retry: %d, want 1", n)
				}
				if want := int64(1 + map[bool]int64{false: 1, true: 0}[row.committed]); runs.Load() != want {
					t.Fatalf("the work ran %d times, want %d", runs.Load(), want)
				}
			})
		}
	})
}

// A duplicate on another Store while the owner's transaction is open waits
// on the unique index: it replays what the owner committed, runs when the
// owner rolled back, and gets ErrInFlight when the wait runs out (on
// SQLite, where the writer's lock does not say whose key it holds, the
// owner is an execution of this process: see
// TestAtomicSQLiteWriterHeldElsewhere for one it does not know).
func TestAtomicDuplicateWaitsForTheTransaction(t *testing.T) {
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		for _, tc := range []struct {
			name     string
			ownerErr error
			wait     time.Duration
		}{
			{name: "owner commits"},
			{name: "owner rolls back", ownerErr: errDeclined},
			{name: "wait runs out", wait: 1500 * time.Millisecond},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := r.store(t)
				var b *tiered.Store
				if tc.wait > 0 {
					b = r.store(t, tiered.WithWait(tc.wait))
				} else {
					b = r.store(t)
				}
				key := newKey(t)
				id := key.String()
				started, release := make(chan struct{}), make(chan struct{})
				owner := doOn(t.Context(), a, key, func(ctx context.Context) ([]byte, error) {
					if err := r.charge(ctx, id); err != nil {
						return nil, err
					}
					close(started)
					<-release
					return []byte("owner"), tc.ownerErr
				})
				<-started
				dup := doOn(t.Context(), b, key, func(ctx context.Context) ([]byte, error) {
					return []byte("duplicate"), r.charge(ctx, id)
				})
				if tc.wait > 0 {
					got := within(t, dup, "the duplicate")
					close(release)
					within(t, owner, "the owner")
					if !errors.Is(got.err, idem.ErrInFlight) {
						t.Fatalf("duplicate past its wait: %v, want ErrInFlight", got)
					}
					return
				}
				// Let the duplicate reach the database, then end the owner.
				time.Sleep(50 * time.Millisecond)
				close(release)
				o := within(t, owner, "the owner")
				got := within(t, dup, "the duplicate")
				want := "owner"
				if tc.ownerErr != nil {
					want = "duplicate"
					if !errors.Is(o.err, errDeclined) {
						t.Fatalf("owner: %v", o)
					}
				}
				if got.err != nil || string(got.res.Value) != want {
					t.Fatalf("duplicate: %v, want %q", got, want)
				}
				if n := r.rows(t, id); n != 1 {
					t.Fatalf("ledger rows: %d, want 1", n)
				}
			})
		}
	})
}

// Many goroutines over three Stores on one database: each key's work runs
// once and commits one row, every caller gets the same answer; half the
// keys fail once first, which leaves nothing behind.
func TestAtomicManyStores(t *testing.T) {
	keys := 40
	if testing.Short() {
		keys = 10
	}
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		stores := []*tiered.Store{r.store(t), r.store(t), r.store(t)}
		for k := range keys {
			key := newKey(t)
			id := key.String()
			var runs, fails atomic.Int64
			var wg sync.WaitGroup
			vals := make([]string, 12)
			errs := make([]error, 12)
			start := make(chan struct{})
			for i := range vals {
				wg.Go(func() {
					<-start
					for {
						res, err := stores[i%len(stores)].Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
							runs.Add(1)
							if err := r.charge(ctx, id); err != nil {
								return nil, err
							}
							if k%2 == 0 && fails.Add(1) == 1 {
								return nil, errDeclined
							}
							return []byte(fmt.Sprintf("run %d", runs.Load())), nil
						})
						if errors.Is(err, errDeclined) || errors.Is(err, idem.ErrInFlight) {
							continue // the client retries
						}
						vals[i], errs[i] = string(res.Value), err
						return
					}
				})
			}
			close(start)
			wg.Wait()
			for i := range vals {
				if errs[i] != nil || vals[i] != vals[0] {
					t.Fatalf("key %d caller %d: %q, %v; caller 0 got %q", k, i, vals[i], errs[i], vals[0])
				}
			}
			if n := r.rows(t, id); n != 1 {
				t.Fatalf("key %d: %d ledger rows, want 1", k, n)
			}
			want := int64(1)
			if k%2 == 0 {
				want = 2
			}
			if runs.Load() != want {
				t.Fatalf("key %d: the work ran %d times, want %d", k, runs.Load(), want)
			}
		}
	})
}

func TestAtomicOptions(t *testing.T) {
	st := stacktest.Embedded(t)
	for _, tc := range []struct {
		name string
		opts []tiered.Option
	}{
		{"no SQL tier", []tiered.Option{tiered.WithRedis(st.RedisLayer(t)), tiered.WithAtomic(true)}},
		{"a SQL tier without transactions", []tiered.Option{tiered.WithSQL(newMem(t)), tiered.WithAtomic(true)}},
		{"with fail-open", []tiered.Option{tiered.WithSQL(st.SQLLayer(t)), tiered.WithAtomic(true), tiered.WithFailOpen(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tiered.New(tc.opts...); !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "WithAtomic") {
				t.Fatalf("New: %v, want an idem.ErrConfig naming WithAtomic", err)
			}
		})
	}
	s := must.Get(tiered.New(tiered.WithSQL(st.SQLLayer(t)), tiered.WithAtomic(false)))(t)
	_ = s.Close()
}
