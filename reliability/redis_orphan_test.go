package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// A Redis claim can outlive what SQL decided about its key: a claim whose
// reply was lost (a reset connection, a timeout, a frozen server that ran
// it on waking) is an orphan its owner never releases, and a claim made by
// a request SQL is about to refuse is in Redis until SQL has answered. Redis
// is not the deciding tier, so what such a claim says — "in progress",
// "another fingerprint" — must never refuse a request SQL would accept.

// orphanClaim makes n's next Redis claim of k happen without n hearing of
// it: the command is applied, the caller gets a lost reply. Redis stays
// unreachable for Complete and Fill, so the owner's result does not reach
// Redis either.
func orphanClaim(t *testing.T, n *node, k idem.Key, fp string, lease time.Duration) {
	t.Helper()
	n.redis.Hook(faultlayer.Reserve, func(ctx context.Context) error {
		n.redis.Hook(faultlayer.Reserve, nil)
		if _, _, err := n.redis.Inner.Reserve(ctx, k, fp, lease, 24*time.Hour); err != nil {
			t.Errorf("the orphan claim itself: %v", err)
		}
		return fmt.Errorf("%w: reply lost", idem.ErrUnavailable)
	})
}

// TestOrphanRedisClaimDoesNotHideSQLResult: with an orphan claim (30 s
// lease) in Redis and the result in SQL, a duplicate on another instance
// gets the result at once — not ErrInFlight (HTTP 409) for as long as the
// orphan's lease lasts — and Redis gets the result back.
func TestOrphanRedisClaimDoesNotHideSQLResult(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		owner := b.node(t)
		k := newKey(t)
		orphanClaim(t, owner, k, "fp", 30*time.Second)
		owner.redis.Fail(fmt.Errorf("%w: still unreachable", idem.ErrUnavailable), faultlayer.Complete, faultlayer.Fill)
		w := newWork("paid")
		if _, err := owner.Do(t.Context(), k, "fp", w.fn); err != nil {
			t.Fatal(err)
		}
		b.requireCompleted(t, k, "paid")
		if rec := b.redisRecord(t, k); rec.state != idem.StateInProgress {
			t.Fatalf("Redis holds %+v, want the orphan claim", rec)
		}
		dup := b.node(t, withStore(tiered.WithWait(2*time.Second), tiered.WithLocalCache(0, 0, 0)))
		r, err := dup.Do(t.Context(), k, "fp", w.fn)
		if err != nil || string(r.Value) != "paid" || w.runs.Load() != 1 {
			t.Fatalf("duplicate: %+v, %v, runs %d; want the result SQL holds", r, err, w.runs.Load())
		}
		if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted || string(rec.result) != "paid" {
			t.Fatalf("Redis after the duplicate: %+v; want the result over the orphan", rec)
		}
	})
}

// TestOrphanRedisClaimDoesNotRefuseCorrectedRequest: the orphan's work
// failed and SQL released the key, so the client may send a corrected
// request with the same key. Redis keeps the orphan, with the retention
// (24 h) as its TTL, and never hands another fingerprint's claim over; the
// corrected request must still run — not get ErrMismatch (HTTP 422) for a
// day while SQL has no record.
func TestOrphanRedisClaimDoesNotRefuseCorrectedRequest(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		const lease = 300 * time.Millisecond
		owner := b.node(t, withStore(tiered.WithLease(lease)))
		k := newKey(t)
		orphanClaim(t, owner, k, "fp-declined", lease)
		declined := errors.New("card declined")
		if _, err := owner.Do(t.Context(), k, "fp-declined", func(context.Context) ([]byte, error) { return nil, declined }); !errors.Is(err, declined) {
			t.Fatalf("owner: %v", err)
		}
		if row := b.sqlRow(t, k); row.found {
			t.Fatalf("SQL row %+v, want the key released", row)
		}
		ttl, err := b.rdb.PTTL(t.Context(), b.redisName(k)).Result()
		if err != nil || ttl < time.Hour {
			t.Fatalf("the orphan's TTL: %v, %v; want the retention", ttl, err)
		}
		var runs atomic.Int64
		r, err := b.node(t).Do(t.Context(), k, "fp-corrected", func(context.Context) ([]byte, error) {
			runs.Add(1)
			return []byte("charged"), nil
		})
		if err != nil || runs.Load() != 1 || string(r.Value) != "charged" {
			t.Fatalf("corrected request: %+v, %v, runs %d; want it to run (SQL has no record)", r, err, runs.Load())
		}
		b.requireCompleted(t, k, "charged")
	})
}

// TestMismatchingClaimDoesNotRefuseCorrectRetry: a key completed for request
// A is in SQL but not in Redis (Redis restarted, was flushed, evicted it,
// or was down when it completed). A request B reusing the key claims it in
// Redis and waits for SQL's refusal; a retry of A arriving meanwhile must
// get A's result — not ErrMismatch (HTTP 422, which clients do not retry)
// because of B's claim.
func TestMismatchingClaimDoesNotRefuseCorrectRetry(t *testing.T) {
	eachBackend(t, sharedBackend, func(t *testing.T, b *backend) {
		k := newKey(t)
		sqlOnly := b.node(t, withoutRedis())
		w := newWork("A's result")
		if _, err := sqlOnly.Do(t.Context(), k, "fp-A", w.fn); err != nil {
			t.Fatal(err)
		}
		other := b.node(t)
		inSQL, proceed := make(chan struct{}), make(chan struct{})
		var release sync.Once
		letGo := func() { release.Do(func() { close(proceed) }) }
		t.Cleanup(letGo) // before the node closes, should the test stop early
		other.sql.Hook(faultlayer.Reserve, func(context.Context) error {
			close(inSQL)
			<-proceed
			return nil
		})
		reuse := goDo(t.Context(), other, k, "fp-B", newWork("B").fn)
		<-inSQL // B holds a Redis claim and waits for SQL's answer
		if rec := b.redisRecord(t, k); rec.state != idem.StateInProgress || rec.fp != "fp-B" {
			t.Fatalf("Redis holds %+v, want B's claim", rec)
		}
		r, err := b.node(t).Do(t.Context(), k, "fp-A", w.fn)
		letGo()
		if got := receive(t, reuse); !errors.Is(got.err, idem.ErrMismatch) {
			t.Fatalf("request B: %v, want ErrMismatch", got)
		}
		if err != nil || string(r.Value) != "A's result" || w.runs.Load() != 1 {
			t.Fatalf("retry of A while B was being refused: %+v, %v, runs %d; want A's result", r, err, w.runs.Load())
		}
	})
}
