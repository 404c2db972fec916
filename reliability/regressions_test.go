package reliability_test

// Weaknesses this suite found in package tiered, kept as regression tests
// now that they are fixed: a late claim reply, a completion given up while
// its token was still good, and a result too large to keep.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// slowReply delays the answer to a claim that succeeded, as a reply held up
// in the network or a process paused right after its claim would.
type slowReply struct {
	idem.Layer
	d time.Duration
}

func (l slowReply) Reserve(ctx context.Context, k idem.Key, fp string, lease, ttl time.Duration) (idem.Record, bool, error) {
	rec, ok, err := l.Layer.Reserve(ctx, k, fp, lease, ttl)
	if ok {
		time.Sleep(l.d)
	}
	return rec, ok, err
}

// TestLateClaimReplyDoesNotStartOnLapsedLease: the claim executed in
// the database at t0, but its answer reached the owner 850 ms later, with a
// 900 ms lease. A Store that counts the lease from when the answer arrived
// starts the work with what it believes is a full lease and renews only
// a lease/3 later — after the lease lapsed. Another instance takes the key
// over and runs while the first run goes on, not cancelled.
//
// Required: the owner counts its lease from when it sent the claim (as it
// now does for renewals), and does not start the work — or cancels it at
// once — when that lease is already (nearly) over; a takeover then finds a
// run that was told to stop.
func TestLateClaimReplyDoesNotStartOnLapsedLease(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = 900 * time.Millisecond
		base := b.node(t, withoutRedis())
		a, err := tiered.New(tiered.WithSQL(slowReply{base.sql, 850 * time.Millisecond}), tiered.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		k := newKey(t)
		var firstRan atomic.Bool
		ownerCtx := make(chan context.Context, 1)
		release := make(chan struct{})
		owner := make(chan error, 1)
		go func() {
			_, err := a.Do(context.Background(), k, "fp", func(ctx context.Context) ([]byte, error) {
				firstRan.Store(true)
				ownerCtx <- ctx
				<-release
				return []byte("first"), ctx.Err()
			})
			owner <- err
		}()
		var octx context.Context
		select {
		case octx = <-ownerCtx:
		case err := <-owner:
			t.Logf("the owner did not start the work: %v", err)
			return // the fixed behaviour
		}
		second := b.node(t, withoutRedis(), withStore(tiered.WithLease(lease), tiered.WithWait(10*time.Second)))
		var firstStopped atomic.Bool
		r, err := second.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			firstStopped.Store(octx.Err() != nil)
			return []byte("second"), nil
		})
		close(release)
		first := <-owner
		if err == nil && !firstStopped.Load() {
			t.Fatalf("two runs overlapped: the second (%q) started while the first, started on a lease that had lapsed, was not cancelled (first: %v)", r.Value, first)
		}
		if err != nil && !errors.Is(err, idem.ErrInFlight) {
			t.Fatal(err)
		}
	})
}

// TestCompletionKeptWhileTokenStillValid: the work succeeded,
// then SQL was unreachable for 1.5 s (a failover) with a 1 s lease. The
// Store retries the completion for lease/2 only, then answers
// ErrUnavailable and forgets the result, though its token stays valid in
// the database until another instance takes the key over. SQL comes back
// at 1.5 s; a retry at 2 s takes the lapsed claim over and runs the work a
// second time. Behind the middleware the first response was already
// written live to the client, so a client whose response was lost in
// transit is charged twice.
//
// Required: the owner keeps trying to complete (renewing while it can)
// until its token is refused (ErrLeaseLost) or a generous bound, so that a
// result survives an outage that ends before anyone takes the key over.
func TestCompletionKeptWhileTokenStillValid(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = time.Second
		owner := b.node(t, withStore(tiered.WithLease(lease)))
		k := newKey(t)
		down := fmt.Errorf("%w: failover in progress", idem.ErrUnavailable)
		var runs atomic.Int64
		_, err := owner.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			runs.Add(1)
			owner.sql.Fail(down, faultlayer.Complete, faultlayer.Renew, faultlayer.Release)
			time.AfterFunc(1500*time.Millisecond, func() { owner.sql.Fail(nil, faultlayer.Complete, faultlayer.Renew, faultlayer.Release) })
			return []byte("charged"), nil
		})
		t.Logf("owner: %v", err)
		time.Sleep(2 * time.Second) // SQL is back; the client retries
		r, err := b.node(t, withStore(tiered.WithLease(lease))).Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			runs.Add(1)
			return []byte("charged again"), nil
		})
		if runs.Load() != 1 {
			t.Fatalf("the work ran %d times (retry got %q, %v): the first run's result was abandoned while its token was still valid", runs.Load(), r.Value, err)
		}
	})
}

// TestTooLargeResultIsNotRunAgain: fn succeeded with a result larger
// than the layers store (idem.MaxResult). Complete fails
// with ErrTooLarge and the Store leaves the claim in progress: retries get
// ErrInFlight until the lease lapses, then take the key over and run fn
// again — on every retry, each a new execution of work that already
// happened.
//
// Required: the work happened once, so the key is finalised (a tombstone,
// as the middleware stores for a response over its limit) and every retry
// gets an error saying the result cannot be replayed, without running fn.
func TestTooLargeResultIsNotRunAgain(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = 500 * time.Millisecond
		opts := []nodeOption{withStore(tiered.WithLease(lease), tiered.WithWait(200*time.Millisecond))}
		k := newKey(t)
		var runs atomic.Int64
		fn := func(context.Context) ([]byte, error) {
			runs.Add(1)
			return []byte(strings.Repeat("x", idem.MaxResult+1)), nil
		}
		if _, err := b.node(t, opts...).Do(t.Context(), k, "fp", fn); !errors.Is(err, idem.ErrTooLarge) {
			t.Fatalf("first call: %v, want ErrTooLarge", err)
		}
		_, within := b.node(t, opts...).Do(t.Context(), k, "fp", fn)
		time.Sleep(2 * lease) // a client's retry, later
		_, after := b.node(t, opts...).Do(t.Context(), k, "fp", fn)
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times (retry within the lease: %v; after it: %v): a result too large to store makes every retry run the work again", runs.Load(), within, after)
		}
	})
}
