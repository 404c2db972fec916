package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The owner's Postgres backend is terminated while its transaction is
// open: nothing commits, and a retry on another Store runs at once.
func TestAtomicBackendKilledMidTransaction(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, redis := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis=%v", redis), func(t *testing.T) {
			st := stacktest.On(t, "postgres", testenv.AnyRedis(t), pg)
			r := &atomicRig{st: st, redis: redis, ledger: newLedger(t, st)}
			app := testenv.Name("atomic_kill")
			victim := &stacktest.Stack{Name: st.Name, Redis: st.Redis, SQL: testenv.WithApplicationName(t, pg, app), Prefix: st.Prefix,
				Records: st.Records, Events: st.Events, Versions: st.Versions}
			opts := []tiered.Option{tiered.WithSQL(victim.SQLLayer(t)), tiered.WithAtomic(true), tiered.WithTimeouts(2*time.Second, 10*time.Second)}
			if redis {
				opts = append(opts, tiered.WithRedis(st.RedisLayer(t)))
			}
			a, b := newStore(t, opts...), r.store(t)
			admin := st.DB(t)
			for round := range 5 {
				key := newKey(t)
				id := key.String()
				started, release := make(chan struct{}), make(chan struct{})
				owner := doOn(t.Context(), a, key, func(ctx context.Context) ([]byte, error) {
					if err := r.charge(ctx, id); err != nil {
						return nil, err
					}
					close(started)
					<-release
					if round%2 == 1 {
						return []byte("paid"), r.charge(ctx, id+"-2") // a statement on the dead connection
					}
					return []byte("paid"), nil // only the completion and the commit meet the dead connection
				})
				<-started
				if n := testenv.TerminatePostgres(t, admin, app); n == 0 {
					t.Fatal("no backend to terminate")
				}
				close(release)
				got := within(t, owner, "the owner")
				if got.err == nil {
					t.Fatalf("round %d: the owner succeeded on a terminated backend: %v", round, got)
				}
				if n := r.rows(t, id); n != 0 {
					t.Fatalf("round %d: %d ledger rows after the kill, want 0", round, n)
				}
				res, err := b.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
					return []byte("retried"), r.charge(ctx, id)
				})
				if err != nil || string(res.Value) != "retried" {
					t.Fatalf("round %d: retry: %+v, %v; want its own run at once", round, res, err)
				}
				if n := r.rows(t, id); n != 1 {
					t.Fatalf("round %d: %d ledger rows after the retry, want 1", round, n)
				}
			}
		})
	}
}

// A caller that gives up leaves the work running: it commits, and the
// retry replays it. A Store closed during the work rolls it back: the retry
// runs.
func TestAtomicCallerGoneAndStoreClosed(t *testing.T) {
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		t.Run("caller gone", func(t *testing.T) {
			a, b := r.store(t), r.store(t, tiered.WithLocalCache(0, 0, 0))
			key := newKey(t)
			id := key.String()
			ctx, cancel := context.WithCancelCause(t.Context())
			started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			owner := doOn(ctx, a, key, func(ctx context.Context) ([]byte, error) {
				defer close(done)
				close(started)
				<-release
				return []byte("paid"), r.charge(ctx, id)
			})
			<-started
			cancel(errGone)
			if got := within(t, owner, "the caller"); !errors.Is(got.err, errGone) {
				t.Fatalf("caller: %v, want its own cause", got)
			}
			close(release)
			<-done
			res, err := b.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("retried"), nil })
			if err != nil || string(res.Value) != "paid" {
				t.Fatalf("retry: %+v, %v; want the replay of paid", res, err)
			}
			if n := r.rows(t, id); n != 1 {
				t.Fatalf("%d ledger rows, want 1", n)
			}
		})
		t.Run("store closed", func(t *testing.T) {
			a, b := r.store(t), r.store(t)
			key := newKey(t)
			id := key.String()
			started := make(chan struct{})
			owner := doOn(t.Context(), a, key, func(ctx context.Context) ([]byte, error) {
				if err := r.charge(ctx, id); err != nil {
					return nil, err
				}
				close(started)
				<-ctx.Done()
				return []byte("paid"), nil
			})
			<-started
			_ = a.Close()
			if got := within(t, owner, "the owner"); got.err == nil {
				t.Fatalf("owner: %v, want an error: the Store closed", got)
			}
			if n := r.rows(t, id); n != 0 {
				t.Fatalf("%d ledger rows after Close, want 0", n)
			}
			res, err := b.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) { return []byte("retried"), r.charge(ctx, id) })
			if err != nil || string(res.Value) != "retried" {
				t.Fatalf("retry: %+v, %v; want its own run", res, err)
			}
		})
	})
}

// The owner's session ends on the server while its work runs without
// touching the database (Postgres: its backend terminated; MariaDB: its
// connection killed): the server rolled the transaction back, so another
// Store claims the key and commits it. The owner's work context is
// cancelled with idem.ErrLeaseLost — fenced as a lost renewal fences it in
// the other modes — and the owner is answered with an error; the key holds
// the other Store's result alone.
func TestAtomicStaleOwnerCancelled(t *testing.T) {
	for _, s := range []*testenv.SQL{testenv.Postgres(t), testenv.MySQL(t)} {
		t.Run(s.Kind, func(t *testing.T) {
			st := stacktest.On(t, s.Kind, testenv.AnyRedis(t), s)
			r := &atomicRig{st: st, ledger: newLedger(t, st)}
			admin := st.DB(t)
			const lease = 900 * time.Millisecond
			a := r.store(t, tiered.WithLease(lease))
			b := r.store(t, tiered.WithLease(lease), tiered.WithWait(100*time.Millisecond))
			key := newKey(t)
			id := key.String()
			session := make(chan int64, 1)
			cause := make(chan error, 1)
			owner := doOn(t.Context(), a, key, func(ctx context.Context) ([]byte, error) {
				if err := r.charge(ctx, id); err != nil {
					return nil, err
				}
				tx, _ := sqllayer.TxFrom(ctx)
				q := "SELECT pg_backend_pid()"
				if s.Kind != "postgres" {
					q = "SELECT CONNECTION_ID()"
				}
				var pid int64
				if err := tx.QueryRowContext(ctx, q).Scan(&pid); err != nil {
					return nil, err
				}
				session <- pid
				select {
				case <-ctx.Done():
					cause <- context.Cause(ctx)
					return nil, context.Cause(ctx)
				case <-time.After(30 * time.Second):
					cause <- nil
					return []byte("stale"), nil
				}
			})
			pid := within(t, session, "the owner's session")
			kill := "SELECT pg_terminate_backend(?)"
			if s.Kind != "postgres" {
				kill = "KILL ?"
			}
			if _, err := admin.ExecContext(t.Context(), kill, pid); err != nil {
				t.Fatalf("end the owner's session: %v", err)
			}
			// The other Store claims the key as soon as the server rolled
			// the owner's transaction back.
			var res tiered.Result
			var err error
			for range 100 {
				res, err = b.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
					return []byte("retried"), r.charge(ctx, id+"-retry")
				})
				if !errors.Is(err, idem.ErrInFlight) {
					break
				}
			}
			if err != nil || string(res.Value) != "retried" {
				t.Fatalf("retry: %+v, %v; want its own run", res, err)
			}
			if got := within(t, cause, "the stale owner's cancellation"); !errors.Is(got, idem.ErrLeaseLost) {
				t.Fatalf("the stale owner's work ended with %v, want a cancellation for idem.ErrLeaseLost", got)
			}
			if got := within(t, owner, "the owner"); got.err == nil {
				t.Fatalf("the stale owner was answered %+v, want an error", got.res)
			}
			if n, m := r.rows(t, id), r.rows(t, id+"-retry"); n != 0 || m != 1 {
				t.Fatalf("ledger: %d rows of the stale owner, %d of the retry; want 0 and 1", n, m)
			}
			replay, err := a.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("third"), nil })
			if err != nil || string(replay.Value) != "retried" {
				t.Fatalf("replay on the owner's Store: %+v, %v; want retried", replay, err)
			}
		})
	}
}

// BEGIN on a pooled connection whose server stopped answering (a black
// hole between the pool and Postgres) fails with idem.ErrUnavailable after
// the Store's SQL timeout, not at the caller's deadline; once the network
// answers again, the key runs.
func TestAtomicBeginBounded(t *testing.T) {
	proxied, proxy := testenv.PostgresViaProxy(t)
	st := stacktest.On(t, "postgres", testenv.AnyRedis(t), proxied)
	r := &atomicRig{st: st, ledger: newLedger(t, st)}
	s := r.store(t, tiered.WithTimeouts(time.Second, 300*time.Millisecond))
	// Two executions leave a connection in the pool that the driver hands
	// out again without a ping (pgx pings a connection idle for more
	// than a second, and one it never reset): the next statement on it is
	// BEGIN.
	for i := range 2 {
		if _, err := s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
			return []byte("warm"), r.charge(ctx, fmt.Sprint("warm", i))
		}); err != nil {
			t.Fatal(err)
		}
	}
	proxy.BlackHole(true)
	key := newKey(t)
	ctx, cancel := context.WithTimeoutCause(t.Context(), time.Minute, errGone)
	defer cancel()
	ran := false
	got := within(t, doOn(ctx, s, key, func(ctx context.Context) ([]byte, error) {
		ran = true
		return []byte("paid"), r.charge(ctx, key.String())
	}), "the call on the black hole")
	proxy.BlackHole(false)
	if !errors.Is(got.err, idem.ErrUnavailable) || errors.Is(got.err, errGone) || ran {
		t.Fatalf("on the black hole: %v (ran %v), want idem.ErrUnavailable from the SQL timeout, without running", got.err, ran)
	}
	var res tiered.Result
	var err error
	for range 50 { // the pool drops the connections the black hole broke
		if res, err = s.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
			return []byte("paid"), r.charge(ctx, key.String())
		}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || string(res.Value) != "paid" || r.rows(t, key.String()) != 1 {
		t.Fatalf("after the black hole: %+v, %v; want the key run once", res, err)
	}
}

// The watch asks the server on a connection of the pool, never on the
// execution's own: a pool of one connection is refused before anything
// runs; a pool whose every other connection stays busy for a whole lease
// confirms nothing, and the work is cancelled as if its transaction had
// ended (nothing of it commits), never left running unwatched; and work
// of ten leases that leaves the watch a connection commits.
func TestAtomicWatchWithAFullPool(t *testing.T) {
	st := stacktest.On(t, "postgres", testenv.AnyRedis(t), testenv.Postgres(t))
	r := &atomicRig{st: st, ledger: newLedger(t, st)}
	const lease = 300 * time.Millisecond
	storeOn := func(conns int) (*tiered.Store, *bun.DB) {
		db := st.DB(t)
		db.SetMaxOpenConns(conns)
		sl, err := sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions))
		if err != nil {
			t.Fatal(err)
		}
		return newStore(t, tiered.WithSQL(sl), tiered.WithAtomic(true), tiered.WithLease(lease), tiered.WithTimeouts(time.Second, time.Second)), db
	}
	store := func(conns int) *tiered.Store { s, _ := storeOn(conns); return s }
	// work charges, then, once every execution of its group has started
	// (all), runs for ten leases unless its context ends first: a check
	// waits a second at most for a connection, and a lease unconfirmed
	// cancels.
	work := func(key idem.Key, all *sync.WaitGroup) func(context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			if err := r.charge(ctx, key.String()); err != nil {
				return nil, err
			}
			all.Done()
			all.Wait()
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(10 * lease):
			}
			return []byte("paid"), nil
		}
	}

	t.Run("one connection", func(t *testing.T) {
		key := newKey(t)
		ran := false
		_, err := store(1).Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		if !errors.Is(err, idem.ErrConfig) || ran {
			t.Fatalf("a pool of one connection: ran=%v, %v; want idem.ErrConfig before any work", ran, err)
		}
	})

	t.Run("every connection held", func(t *testing.T) {
		// The pool's other connection is held elsewhere (a long query of
		// the application's) for the whole execution.
		s, db := storeOn(2)
		held, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		key := newKey(t)
		var alone sync.WaitGroup
		alone.Add(1)
		_, err = s.Do(t.Context(), key, "fp", work(key, &alone))
		if !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("an execution on a pool held elsewhere: %v; want idem.ErrLeaseLost", err)
		}
		if n := r.rows(t, key.String()); n != 0 {
			t.Errorf("%d ledger rows, want none committed", n)
		}
	})

	t.Run("a connection to spare", func(t *testing.T) {
		key := newKey(t)
		var alone sync.WaitGroup
		alone.Add(1)
		res, err := store(2).Do(t.Context(), key, "fp", work(key, &alone))
		if err != nil || string(res.Value) != "paid" {
			t.Fatalf("long work on a pool with a connection to spare: %+v, %v; want it committed", res, err)
		}
		if n := r.rows(t, key.String()); n != 1 {
			t.Fatalf("%d ledger rows, want 1", n)
		}
	})
}
