package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// orphan makes r's next Reserve of k apply but report failure, as a lost
// reply does: the Redis claim exists and its owner never learns of it.
func orphan(t *testing.T, r *faultlayer.Layer, k idem.Key, fp string, lease time.Duration) {
	t.Helper()
	r.Hook(faultlayer.Reserve, func(ctx context.Context) error {
		r.Hook(faultlayer.Reserve, nil)
		if _, _, err := r.Inner.Reserve(ctx, k, fp, lease, 24*time.Hour); err != nil {
			t.Errorf("the orphan claim itself: %v", err)
		}
		return fmt.Errorf("%w: reply lost", idem.ErrUnavailable)
	})
}

// An orphan Redis claim must not hide a result SQL holds: a duplicate gets
// the result, not ErrInFlight for the orphan's lease.
func TestOrphanRedisClaimDoesNotHideSQLResult(t *testing.T) {
	for _, tc := range []struct {
		name  string
		redis func(t *testing.T, st *stacktest.Stack) idem.Layer
	}{
		{"memory", func(t *testing.T, _ *stacktest.Stack) idem.Layer { return newMem(t) }},
		{"redis", func(t *testing.T, st *stacktest.Stack) idem.Layer { return st.RedisLayer(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := stacktest.Real(t)
			redis := faultlayer.New(tc.redis(t, st))
			sql := st.SQLLayer(t)
			owner := newStore(t, tiered.WithRedis(redis), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0))
			k := newKey(t)
			orphan(t, redis, k, "fp", 30*time.Second)
			redis.Fail(fmt.Errorf("%w: still down", idem.ErrUnavailable), faultlayer.Complete)
			var c counter
			if _, err := owner.Do(t.Context(), k, "fp", c.fn("paid")); err != nil {
				t.Fatal(err)
			}
			redis.Up()
			dup := newStore(t, tiered.WithRedis(redis.Inner), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0), tiered.WithWait(2*time.Second))
			r, err := dup.Do(t.Context(), k, "fp", c.fn("again"))
			if err != nil || string(r.Value) != "paid" || c.runs.Load() != 1 {
				t.Fatalf("duplicate: %+v, %v, runs %d; want the result SQL holds", r, err, c.runs.Load())
			}
			// The result was back-filled over the orphan, where Redis can:
			// off the caller's time, and Close waits for it.
			if _, ok := redis.Inner.(idem.Filler); !ok {
				return
			}
			_ = dup.Close()
			if rec, err := redis.Inner.Get(t.Context(), k); err != nil || !rec.Completed() {
				t.Fatalf("Redis after the duplicate: %+v, %v; want the completed result", rec, err)
			}
		})
	}
}

// An orphan Redis claim whose work failed (SQL released the key) must not
// refuse a corrected request with the same key: SQL has no record, so the
// new request runs, and its result replaces the orphan.
func TestOrphanRedisClaimDoesNotRefuseNewRequest(t *testing.T) {
	st := stacktest.Real(t)
	redis := faultlayer.New(st.RedisLayer(t))
	sql := st.SQLLayer(t)
	s := newStore(t, tiered.WithRedis(redis.Waiting()), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0))
	k := newKey(t)
	orphan(t, redis, k, "fp-declined", 30*time.Second)
	declined := errors.New("card declined")
	if _, err := s.Do(t.Context(), k, "fp-declined", func(context.Context) ([]byte, error) { return nil, declined }); !errors.Is(err, declined) {
		t.Fatal(err)
	}
	var c counter
	r, err := s.Do(t.Context(), k, "fp-corrected", c.fn("paid with another card"))
	if err != nil || r.Replayed || c.runs.Load() != 1 {
		t.Fatalf("corrected request: %+v, %v; want it to run (SQL released the key)", r, err)
	}
	_ = s.Close() // Redis learns the result off the caller's time; Close waits for it
	rec, err := redis.Inner.Get(t.Context(), k)
	if err != nil || !rec.Completed() || rec.Fingerprint != "fp-corrected" {
		t.Fatalf("Redis holds %+v, %v; want the corrected request's result", rec, err)
	}
}

// A renewal that hangs longer than the rest of the lease is abandoned at
// the lease, and the work is cancelled before another owner can take over.
func TestSlowRenewalCancelsWorkBeforeTakeover(t *testing.T) {
	const lease = 600 * time.Millisecond
	shared := newMem(t)
	sql := faultlayer.New(shared)
	sql.Delay(3*time.Second, faultlayer.Renew)
	a := newStore(t, tiered.WithSQL(sql), tiered.WithLease(lease), tiered.WithLocalCache(0, 0, 0))
	b := newStore(t, tiered.WithSQL(shared), tiered.WithLease(lease), tiered.WithLocalCache(0, 0, 0), tiered.WithWait(5*time.Second))
	k := newKey(t)
	ownerCtx := make(chan context.Context, 1)
	release := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
			ownerCtx <- ctx
			<-release
			return []byte("stale"), nil
		})
		aDone <- err
	}()
	octx := <-ownerCtx
	var overlapped bool
	r, err := b.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
		overlapped = octx.Err() == nil
		return []byte("winner"), nil
	})
	close(release)
	if err != nil || string(r.Value) != "winner" {
		t.Fatalf("takeover: %+v, %v", r, err)
	}
	if overlapped {
		t.Fatal("the new owner ran while the old owner's work was not cancelled")
	}
	if !errors.Is(context.Cause(octx), idem.ErrLeaseLost) {
		t.Fatalf("old owner's cause: %v", context.Cause(octx))
	}
	if err := <-aDone; !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("old owner: %v, want ErrLeaseLost", err)
	}
}
