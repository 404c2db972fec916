package reliability_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// TestRedisLosesLeaseWhileWorkRuns empties Redis under a running owner — by
// FLUSHALL, as an operator or a failover to an empty replica would, or by
// deleting the one lease key, as an eviction would. A duplicate on another
// instance then gets a Redis claim of its own, but SQL refuses it: fn runs
// once, the duplicate gets the owner's result, and the result ends up in
// Redis over the duplicate's claim (back-fill).
func TestRedisLosesLeaseWhileWorkRuns(t *testing.T) {
	cases := []struct {
		name string
		lose func(t *testing.T, b *backend, k idem.Key)
	}{
		{"Flushall", func(t *testing.T, b *backend, _ idem.Key) { b.flushRedis(t) }},
		{"LeaseKeyDeleted", func(t *testing.T, b *backend, k idem.Key) {
			if n, err := b.rdb.Del(context.Background(), b.redisName(k)).Result(); err != nil || n != 1 {
				t.Fatalf("DEL the lease key: %d, %v", n, err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
				a := b.node(t)
				dupNode := b.node(t, withStore(tiered.WithLocalCache(0, 0, 0)))
				k := newKey(t)
				w := heldWork("booked")
				owner := goDo(t.Context(), a, k, "fp", w.fn)
				<-w.entered
				if rec := b.redisRecord(t, k); rec.state != idem.StateInProgress {
					t.Fatalf("Redis before the loss: %+v, want the owner's claim", rec)
				}
				tc.lose(t, b, k)
				dup := goDo(t.Context(), dupNode, k, "fp", w.fn)
				// The duplicate's own claim appears in Redis: Redis said yes.
				waitFor(t, "the duplicate's Redis claim", func() bool {
					return b.redisRecord(t, k).state == idem.StateInProgress
				})
				w.Release()
				if got := receive(t, owner); got.err != nil || string(got.res.Value) != "booked" {
					t.Fatalf("owner: %v", got)
				}
				if got := receive(t, dup); got.err != nil || string(got.res.Value) != "booked" || !got.res.Replayed {
					t.Fatalf("duplicate with a Redis claim: %v; want SQL's refusal and the owner's result", got)
				}
				if n := w.runs.Load(); n != 1 {
					t.Fatalf("fn ran %d times, want 1", n)
				}
				b.requireCompleted(t, k, "booked")
				if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted || string(rec.result) != "booked" {
					t.Fatalf("Redis at the end: %+v; want the result back-filled", rec)
				}
				if keys := b.keysWithoutTTL(t); len(keys) != 0 {
					t.Fatalf("keys without a TTL: %v", keys)
				}
				// Redis answers the next duplicate alone.
				r, err := b.node(t, withStore(tiered.WithLocalCache(0, 0, 0))).Do(t.Context(), k, "fp", w.fn)
				if err != nil || r.Tier != idem.TierRedis || string(r.Value) != "booked" {
					t.Fatalf("next duplicate: %+v, %v; want a Redis replay", r, err)
				}
				t.Logf("%s: the duplicate's Redis claim was overruled by SQL; 1 run; result back-filled (replay event tiers: dup node %d sql)",
					b.name, dupNode.events.count("replayed/sql"))
			})
		})
	}
}
