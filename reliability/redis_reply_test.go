package reliability_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/tiered"
)

// replyRig is a backend with a fault proxy in front of its Redis: the owner
// node talks through the proxy, the other nodes directly.
type replyRig struct {
	b     *backend
	proxy *faultproxy.Proxy
	owner *node
	dups  []*node
}

// replyLease is the lease of the rig's nodes. No scenario waits for it to
// lapse; it bounds each completion and renewal attempt (lease/8), and a
// new Postgres connection on a machine at load 9 under -race takes longer
// than the 75 ms of a 600 ms lease, which failed the owner's completion.
const replyLease = 4 * time.Second

func newReplyRig(t *testing.T, b *backend) *replyRig {
	t.Helper()
	p, err := faultproxy.New(b.ropts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	opts := withStore(tiered.WithLease(replyLease), tiered.WithLocalCache(0, 0, 0))
	r := &replyRig{b: b, proxy: p, owner: b.node(t, withRedisAddr(p.Addr()), opts)}
	r.dups = []*node{b.node(t, opts), b.node(t, opts)}
	// A pooled connection to the proxy, so that a dropped reply belongs to a
	// command Redis received (a new connection would lose its handshake).
	if _, err := r.owner.Do(t.Context(), newKey(t), "warm-up", newWork("x").fn); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedisReplyLost runs the owner's Redis commands through a proxy that
// lets Redis apply them and then resets the connection instead of passing
// the reply on: a claim, a completion or a release that happened but that
// the owner never heard of. No case runs fn twice; duplicates waiting on
// Redis are answered; the result ends up in SQL and in Redis.
func TestRedisReplyLost(t *testing.T) {
	t.Run("Reserve", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
			r := newReplyRig(t, b)
			k := newKey(t)
			w := heldWork("charged")
			r.proxy.DropReplies(true)
			owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
			<-w.entered // the Reserve failed for the owner; SQL decided alone
			r.proxy.DropReplies(false)
			if rec := b.redisRecord(t, k); !rec.found || rec.state != idem.StateInProgress {
				t.Fatalf("Redis holds %+v; want the claim the owner never heard of", rec)
			}
			// A duplicate finds that orphan claim and waits on Redis.
			dup := goDo(t.Context(), r.dups[0], k, "fp", w.fn)
			waitSubscribers(t, b, k, 1)
			w.Release()
			if a := receive(t, owner); a.err != nil || string(a.res.Value) != "charged" || a.res.Tier != idem.TierSQL {
				t.Fatalf("owner: %v; want its run, decided by SQL", a)
			}
			if a := receive(t, dup); a.err != nil || string(a.res.Value) != "charged" || !a.res.Replayed {
				t.Fatalf("duplicate waiting on the orphan claim: %v; want the owner's result", a)
			}
			if n := w.runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
			b.requireCompleted(t, k, "charged")
			if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted || string(rec.result) != "charged" {
				t.Fatalf("Redis holds %+v; want the result back-filled over the orphan claim", rec)
			}
			t.Logf("%s: %d replies dropped; 1 run; the waiting duplicate was woken by the back-fill", b.name, r.proxy.DroppedReplies())
		})
	})

	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
			r := newReplyRig(t, b)
			k := newKey(t)
			w := heldWork("shipped")
			var drop sync.Once
			r.owner.redis.Hook(faultlayer.Complete, func(context.Context) error {
				drop.Do(func() { r.proxy.DropReplies(true) })
				return nil
			})
			owner := goDo(t.Context(), r.owner, k, "fp", w.fn)
			<-w.entered
			dup := goDo(t.Context(), r.dups[0], k, "fp", w.fn)
			waitSubscribers(t, b, k, 1)
			w.Release()
			a := receive(t, owner)
			// The owner is answered once SQL holds the result; its Redis
			// completion goes out just after, and its reply is the one lost.
			waitFor(t, "the owner's Redis completion, whose reply is dropped", func() bool { return r.proxy.DroppedReplies() > 0 })
			r.proxy.DropReplies(false)
			if a.err != nil || string(a.res.Value) != "shipped" {
				t.Fatalf("owner: %v; SQL holds the result, the lost Redis reply must not fail the call", a)
			}
			if d := receive(t, dup); d.err != nil || string(d.res.Value) != "shipped" {
				t.Fatalf("duplicate: %v", d)
			}
			// The completion Redis applied is what the late duplicate reads.
			if rec := b.redisCompleted(t, k); string(rec.result) != "shipped" {
				t.Fatalf("Redis holds %+v; want the completion it applied", rec)
			}
			late, err := r.dups[1].Do(t.Context(), k, "fp", w.fn)
			if err != nil || late.Tier != idem.TierRedis || string(late.Value) != "shipped" {
				t.Fatalf("late duplicate: %+v, %v; want the completion Redis applied", late, err)
			}
			if n := w.runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
			b.requireCompleted(t, k, "shipped")
			t.Logf("%s: %d replies dropped; 1 run; Redis kept the completion it applied", b.name, r.proxy.DroppedReplies())
		})
	})

	// The owner's claim reached Redis unheard and its work then failed: SQL
	// released the key, but no one can release the orphan claim in Redis.
	// A retry is not refused for it: SQL has no record, so the retry runs,
	// once, and its result replaces the orphan in Redis.
	t.Run("ReserveThenWorkFails", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
			r := newReplyRig(t, b)
			k := newKey(t)
			boom := errors.New("card declined by a flaky gateway")
			entered := make(chan struct{})
			r.proxy.DropReplies(true)
			_, err := r.owner.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
				close(entered)
				r.proxy.DropReplies(false)
				return nil, boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("owner: %v, want its own error", err)
			}
			if row := b.sqlRow(t, k); row.found {
				t.Fatalf("SQL row after the failed work: %+v, want it released", row)
			}
			if rec := b.redisRecord(t, k); !rec.found || rec.state != idem.StateInProgress {
				t.Fatalf("Redis holds %+v; want the orphan claim", rec)
			}
			w := newWork("charged on retry")
			got, err := r.dups[0].Do(t.Context(), k, "fp", w.fn)
			if err != nil || string(got.Value) != "charged on retry" || got.Replayed {
				t.Fatalf("retry: %+v, %v; want it to run (SQL released the key)", got, err)
			}
			if n := w.runs.Load(); n != 1 {
				t.Fatalf("retry ran fn %d times", n)
			}
			b.requireCompleted(t, k, "charged on retry")
			if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted || string(rec.result) != "charged on retry" {
				t.Fatalf("Redis holds %+v after the retry", rec)
			}
			t.Logf("%s: the retry ran once despite the orphan claim", b.name)
		})
	})
}
