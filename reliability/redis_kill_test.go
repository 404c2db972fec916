package reliability_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// waitSubscribers waits until n instances subscribe to the completion
// channel of k: their duplicates wait on Redis for the owner's signal.
func waitSubscribers(t *testing.T, b *backend, k idem.Key, n int64) {
	t.Helper()
	ch := b.redisName(k) + ":done"
	waitFor(t, "duplicates subscribed to the completion channel", func() bool {
		m, err := b.rdb.PubSubNumSub(context.Background(), ch).Result()
		return err == nil && m[ch] >= n
	})
}

// TestRedisKilledMidRequest kills Redis while the owner's function runs and
// duplicates on two other instances wait for its completion signal, or while
// the owner publishes its result to Redis. The function runs once; every
// caller gets the result (from SQL once Redis is gone) or a retryable
// ErrUnavailable/ErrInFlight; the result is in SQL; after a restart the next
// duplicate replays it from SQL and back-fills the empty Redis.
func TestRedisKilledMidRequest(t *testing.T) {
	for _, when := range []string{"DuringWork", "DuringPublish"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
				a, bb, c := b.node(t), b.node(t), b.node(t)
				k := newKey(t)
				w := heldWork("paid once")
				if when == "DuringPublish" {
					var kill sync.Once
					a.redis.Hook(faultlayer.Complete, func(context.Context) error {
						kill.Do(func() { b.killRedis(t) })
						return nil
					})
				}
				owner := goDo(t.Context(), a, k, "fp", w.fn)
				<-w.entered
				dups := []<-chan answer{
					goDo(t.Context(), a, k, "fp", w.fn), // joins the owner's execution
					goDo(t.Context(), bb, k, "fp", w.fn),
					goDo(t.Context(), bb, k, "fp", w.fn),
					goDo(t.Context(), c, k, "fp", w.fn),
				}
				waitSubscribers(t, b, k, 2)
				var late <-chan answer
				nodes := []*node{a, bb, c}
				if when == "DuringWork" {
					b.killRedis(t)
					// A newcomer after the kill: Redis refuses, SQL says in progress.
					n := b.node(t)
					nodes = append(nodes, n)
					late = goDo(t.Context(), n, k, "fp", w.fn)
				}
				w.Release()

				got := receive(t, owner)
				if got.err != nil || string(got.res.Value) != "paid once" || got.res.Replayed {
					t.Fatalf("owner: %v, want its own result", got)
				}
				if late != nil {
					dups = append(dups, late)
				}
				replays, refused := 0, 0
				for i, ch := range dups {
					d := receive(t, ch)
					switch {
					case d.err == nil && string(d.res.Value) == "paid once" && d.res.Replayed:
						replays++
					case d.err != nil && acceptable(d.err):
						refused++
					default:
						t.Fatalf("duplicate %d: %v; want the owner's result or a retryable refusal", i, d)
					}
				}
				if n := w.runs.Load(); n != 1 {
					t.Fatalf("fn ran %d times, want 1", n)
				}
				b.requireCompleted(t, k, "paid once")
				t.Logf("%s: 1 run, %d duplicates replayed, %d refused (retryable); result in SQL", b.name, replays, refused)

				// Their writes to Redis go on after the answers, off the
				// callers' time: let them end (against the dead server)
				// before it comes back empty.
				for _, n := range nodes {
					_ = n.Close()
				}
				b.restartRedis(t)
				cold := b.node(t, withStore(tiered.WithLocalCache(0, 0, 0)))
				r, err := cold.Do(t.Context(), k, "fp", w.fn)
				if err != nil || string(r.Value) != "paid once" || r.Tier != idem.TierSQL {
					t.Fatalf("after the restart: %v, %v; want a SQL replay", r, err)
				}
				if rec := b.redisCompleted(t, k); !rec.found || rec.state != idem.StateCompleted || string(rec.result) != "paid once" {
					t.Fatalf("Redis after the SQL replay: %+v; want the result back-filled", rec)
				}
				r, err = cold.Do(t.Context(), k, "fp", w.fn)
				if err != nil || r.Tier != idem.TierRedis || string(r.Value) != "paid once" {
					t.Fatalf("next duplicate: %v, %v; want a Redis replay", r, err)
				}
				if n := w.runs.Load(); n != 1 {
					t.Fatalf("fn ran %d times, want 1", n)
				}
			})
		})
	}
}
