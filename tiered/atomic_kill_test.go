package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
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
