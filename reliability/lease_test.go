package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// TestOwnerPausedPastLease stalls an owner (a GC pause, a frozen VM): its
// renewals in both tiers are refused by a fault and its function does not
// return until another instance has taken the lapsed lease over. The stale
// owner's context is cancelled with cause ErrLeaseLost, its completion is
// refused with ErrLeaseLost whether it comes while the winner still runs or
// after the winner completed, and the only stored result, in SQL and in
// Redis, is the winner's.
func TestOwnerPausedPastLease(t *testing.T) {
	const lease = 400 * time.Millisecond
	for _, order := range []string{"StaleFinishesAfterWinner", "StaleFinishesWhileWinnerRuns"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
				opts := withStore(tiered.WithLease(lease), tiered.WithWait(10*time.Second), tiered.WithLocalCache(0, 0, 0))
				stale, winner := b.node(t, opts), b.node(t, opts)
				blocked := errors.New("renewal blocked: the owner is stalled")
				stale.sql.Fail(blocked, faultlayer.Renew)
				stale.redis.Fail(blocked, faultlayer.Renew)
				k := newKey(t)

				var staleCause atomic.Value
				staleIn, resume := make(chan struct{}), make(chan struct{})
				staleDone := goDo(t.Context(), stale, k, "fp", func(ctx context.Context) ([]byte, error) {
					close(staleIn)
					<-resume // stalled: it neither sees its cancellation nor returns
					if err := context.Cause(ctx); err != nil {
						staleCause.Store(err)
					}
					return []byte("stale"), nil
				})
				<-staleIn

				winIn, winGo := make(chan struct{}), make(chan struct{})
				w := newWork("winner")
				winFn := func(ctx context.Context) ([]byte, error) {
					close(winIn)
					<-winGo
					return w.fn(ctx)
				}
				winDone := goDo(t.Context(), winner, k, "fp", winFn)
				<-winIn // the winner took over the lapsed lease in both tiers
				var staleGot, winGot answer
				if order == "StaleFinishesWhileWinnerRuns" {
					close(resume)
					staleGot = receive(t, staleDone)
					close(winGo)
					winGot = receive(t, winDone)
				} else {
					close(winGo)
					winGot = receive(t, winDone)
					close(resume)
					staleGot = receive(t, staleDone)
				}
				if !errors.Is(staleGot.err, idem.ErrLeaseLost) {
					t.Fatalf("stale owner: %v, want ErrLeaseLost", staleGot)
				}
				if c, _ := staleCause.Load().(error); !errors.Is(c, idem.ErrLeaseLost) {
					t.Fatalf("stale owner's context cause: %v, want ErrLeaseLost", c)
				}
				if winGot.err != nil || string(winGot.res.Value) != "winner" {
					t.Fatalf("winner: %v", winGot)
				}
				b.requireCompleted(t, k, "winner")
				if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted || string(rec.result) != "winner" {
					t.Fatalf("Redis: %+v, want the winner's result", rec)
				}
				r, err := b.node(t).Do(t.Context(), k, "fp", w.fn)
				if err != nil || string(r.Value) != "winner" || w.runs.Load() != 1 {
					t.Fatalf("later duplicate: %+v, %v (winner runs %d)", r, err, w.runs.Load())
				}
				t.Logf("%s: stale completion refused (%v); one stored result", b.name, staleGot.err)
			})
		})
	}
}

// dbMicros returns the database clock in microseconds since the epoch.
func (b *backend) dbMicros(ctx context.Context) (int64, error) {
	q := "SELECT " + b.dbNow()
	if b.pg {
		q = "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint"
	}
	var n int64
	err := b.admin.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// leaseUntilMicros returns k's lease end as the database stored it.
func (b *backend) leaseUntilMicros(t *testing.T, k idem.Key) int64 {
	t.Helper()
	col := "lease_until"
	if b.pg {
		col = "(extract(epoch from lease_until) * 1000000)::bigint"
	}
	d := k.Digest()
	var n int64
	if err := b.admin.QueryRowContext(context.Background(), "SELECT "+col+" FROM "+b.st.Records+" WHERE key_digest = ?", d[:]).Scan(&n); err != nil {
		t.Fatalf("lease_until: %v", err)
	}
	return n
}

// TestCrashAfterClaim: an instance claimed a key in both tiers and died
// before its side effect. The retry runs the work exactly once, and only
// once the claim's lease has lapsed by the database's clock. No
// application clock takes part: the SQL layer reads none (it has no option
// for one), and the soak runs processes whose clocks are off by minutes.
func TestCrashAfterClaim(t *testing.T) {
	const lease = 300 * time.Millisecond
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		k := newKey(t)
		crashed := b.node(t) // only its layers are used: it claims, then dies
		if _, claimed, err := crashed.sql.Inner.Reserve(t.Context(), k, "fp", lease, time.Hour); err != nil || !claimed {
			t.Fatalf("crashed instance's SQL claim: %v, %v", claimed, err)
		}
		if _, claimed, err := crashed.redis.Inner.Reserve(t.Context(), k, "fp", lease, time.Hour); err != nil || !claimed {
			t.Fatalf("crashed instance's Redis claim: %v, %v", claimed, err)
		}
		claimEnd := b.leaseUntilMicros(t, k)

		retry := b.node(t, withStore(tiered.WithLease(lease), tiered.WithWait(10*time.Second)))
		var ranAt atomic.Int64
		w := newWork("side effect done once")
		r, err := retry.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
			now, err := b.dbMicros(ctx)
			if err != nil {
				return nil, err
			}
			ranAt.Store(now)
			return w.fn(ctx)
		})
		if err != nil || string(r.Value) != "side effect done once" || r.Replayed {
			t.Fatalf("retry: %+v, %v; want it to run once the crashed claim lapsed", r, err)
		}
		if ranAt.Load() < claimEnd {
			t.Fatalf("the retry ran %dµs before the crashed claim's lease ended by the database clock", claimEnd-ranAt.Load())
		}
		if n := w.runs.Load(); n != 1 {
			t.Fatalf("fn ran %d times", n)
		}
		b.requireCompleted(t, k, "side effect done once")
		t.Logf("%s: ran %dms after the crashed lease ended by the database clock", b.name, (ranAt.Load()-claimEnd)/1000)
	})
}

// TestStoreClosedMidWork: a Store closed while its work runs, whose release
// does not reach either tier (the process is going down with its network),
// leaves claims behind that no renewal keeps alive. A retry on another
// instance runs the side effect once, after the lease.
func TestStoreClosedMidWork(t *testing.T) {
	const lease = 300 * time.Millisecond
	eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
		opts := withStore(tiered.WithLease(lease), tiered.WithWait(10*time.Second))
		dying, survivor := b.node(t, opts), b.node(t, opts)
		gone := fmt.Errorf("%w: process going down", idem.ErrUnavailable)
		dying.sql.Fail(gone, faultlayer.Release, faultlayer.Renew)
		dying.redis.Fail(gone, faultlayer.Release, faultlayer.Renew)
		k := newKey(t)
		var effects atomic.Int64
		in := make(chan struct{})
		dyingDone := goDo(context.Background(), dying, k, "fp", func(ctx context.Context) ([]byte, error) {
			close(in)
			<-ctx.Done() // cancelled by Close before the side effect
			return nil, context.Cause(ctx)
		})
		<-in
		_ = dying.Close()
		if a := receive(t, dyingDone); a.err == nil {
			t.Fatalf("work cancelled by Close: %v, want an error", a)
		}
		if row := b.sqlRow(t, k); row.state != idem.StateInProgress {
			t.Fatalf("SQL after the crash: %+v, want the abandoned claim", row)
		}
		r, err := survivor.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			effects.Add(1)
			return []byte("done by the survivor"), nil
		})
		if err != nil || string(r.Value) != "done by the survivor" || effects.Load() != 1 {
			t.Fatalf("retry: %+v, %v, side effects %d", r, err, effects.Load())
		}
		b.requireCompleted(t, k, "done by the survivor")
		if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted {
			t.Fatalf("Redis after the retry: %+v", rec)
		}
	})
}

// TestRenewalStuckPastLeaseCancelsWork: one renewal hangs (a stalled
// network, a pool with no free connection) for longer than the rest of the
// lease but under the SQL timeout. The owner must be cancelled before its
// lease lapses in the database, so that when another instance takes over,
// the first run has already been told to stop: two runs never overlap
// unknowingly.
func TestRenewalStuckPastLeaseCancelsWork(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = 3 * time.Second
		a := b.node(t, withStore(tiered.WithLease(lease), tiered.WithLocalCache(0, 0, 0)))
		a.sql.Delay(10*time.Second, faultlayer.Renew) // each renewal hangs until its context ends
		k := newKey(t)
		ownerCtx := make(chan context.Context, 1)
		release := make(chan struct{})
		owner := goDo(t.Context(), a, k, "fp", func(ctx context.Context) ([]byte, error) {
			ownerCtx <- ctx
			<-release
			return []byte("first"), ctx.Err()
		})
		octx := <-ownerCtx
		second := b.node(t, withStore(tiered.WithLease(lease), tiered.WithWait(20*time.Second), tiered.WithLocalCache(0, 0, 0)))
		var firstStopped atomic.Bool
		r, err := second.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			firstStopped.Store(octx.Err() != nil)
			return []byte("second"), nil
		})
		close(release)
		first := receive(t, owner)
		if err != nil || string(r.Value) != "second" {
			t.Fatalf("second instance: %+v, %v; want it to take the lapsed lease over", r, err)
		}
		if !firstStopped.Load() {
			t.Fatal("the second run started while the first owner's work was not cancelled: its lease lapsed during a stuck renewal")
		}
		if !errors.Is(first.err, idem.ErrLeaseLost) || !errors.Is(context.Cause(octx), idem.ErrLeaseLost) {
			t.Fatalf("first owner: %v, context cause %v; want ErrLeaseLost", first, context.Cause(octx))
		}
		b.requireCompleted(t, k, "second")
	})
}
