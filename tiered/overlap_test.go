package tiered_test

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
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// faulted is a Store over fault wrappers of a stack's Redis and SQL layers,
// with no local cache, closed when the test ends.
func faulted(t *testing.T, st *stacktest.Stack) (*tiered.Store, *faultlayer.WaitingLayer, *faultlayer.Layer) {
	t.Helper()
	redis := faultlayer.New(st.RedisLayer(t)).Waiting()
	sql := faultlayer.New(st.SQLLayer(t))
	s := newStore(t, tiered.WithRedis(redis), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0),
		tiered.WithTimeouts(2*time.Second, 10*time.Second))
	return s, redis, sql
}

// newKeys runs n first executions on s, which teaches it that its calls
// need SQL.
func newKeys(t *testing.T, s *tiered.Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Do(t.Context(), newKey(t), "fp", func(context.Context) ([]byte, error) { return []byte(fmt.Sprint(i)), nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// While its calls are new keys, a Store sends the SQL claim while the Redis
// claim is out: Redis's Reserve here answers only once SQL's has been sent,
// which a Store that asked them one after the other never does.
func TestNewKeyClaimsBothTiersAtOnce(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		s, redis, sql := faulted(t, st)
		newKeys(t, s, 3)
		type gate struct {
			sent chan struct{} // closed when the SQL claim is sent
			once sync.Once
		}
		var cur atomic.Pointer[gate]
		var together, apart atomic.Int64
		sql.Hook(faultlayer.Reserve, func(context.Context) error {
			if g := cur.Load(); g != nil {
				g.once.Do(func() { close(g.sent) })
			}
			return nil
		})
		redis.Hook(faultlayer.Reserve, func(context.Context) error {
			g := cur.Load()
			if g == nil {
				return nil
			}
			select {
			case <-g.sent:
				together.Add(1)
				return nil
			case <-time.After(time.Second):
				apart.Add(1)
				return fmt.Errorf("%w: the SQL claim was not sent while Redis's was out", idem.ErrUnavailable)
			}
		})
		for i := range 5 {
			cur.Store(&gate{sent: make(chan struct{})})
			var c counter
			r, err := s.Do(t.Context(), newKey(t), "fp", c.fn("paid"))
			if err != nil || r.Replayed || string(r.Value) != "paid" || c.runs.Load() != 1 {
				t.Fatalf("call %d: %+v, %v, runs %d; want one execution", i, r, err, c.runs.Load())
			}
		}
		if apart.Load() != 0 || together.Load() != 5 {
			t.Fatalf("%d of 5 first executions sent their claims together, %d one after the other", together.Load(), apart.Load())
		}
	})
}

// The caller of a first execution is answered once SQL holds the result,
// while Redis's completion is still out; a duplicate that comes in between
// is answered from SQL with the same result, and Redis holds it once its
// completion lands.
func TestAnswerDoesNotWaitForRedis(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		s, redis, _ := faulted(t, st)
		newKeys(t, s, 3)
		release := make(chan struct{})
		var inside, left atomic.Int64
		redis.Hook(faultlayer.Complete, func(ctx context.Context) error {
			inside.Add(1)
			defer left.Add(1)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", idem.ErrUnavailable, ctx.Err())
			}
		})
		k := newKey(t)
		var c counter
		r, err := s.Do(t.Context(), k, "fp", c.fn("paid"))
		if err != nil || string(r.Value) != "paid" || r.Tier != idem.TierSQL {
			t.Fatalf("owner: %+v, %v", r, err)
		}
		if left.Load() != 0 {
			t.Fatalf("the owner was answered after Redis's completion returned (%d entered, %d left)", inside.Load(), left.Load())
		}
		// A duplicate on another instance, meanwhile: Redis says in
		// progress, SQL holds the result.
		dup := newStore(t, tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(st.SQLLayer(t)), tiered.WithLocalCache(0, 0, 0))
		r, err = dup.Do(t.Context(), k, "fp", c.fn("again"))
		if err != nil || !r.Replayed || string(r.Value) != "paid" || c.runs.Load() != 1 {
			t.Fatalf("duplicate in between: %+v, %v, runs %d; want the stored result", r, err, c.runs.Load())
		}
		close(release)
		_ = s.Close()
		_ = dup.Close()
		rec, err := st.RedisLayer(t).Get(t.Context(), k)
		if err != nil || !rec.Completed() || string(rec.Result) != "paid" {
			t.Fatalf("Redis after the completion landed: %+v, %v", rec, err)
		}
	})
}

// A waiter on another instance, which found the key in progress in both
// tiers, is woken by the completion that reaches Redis after the owner was
// answered: it gets the owner's result well within its wait.
func TestWaiterWokenByLateRedisCompletion(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		owner, _, _ := faulted(t, st)
		newKeys(t, owner, 3)
		redis := faultlayer.New(st.RedisLayer(t)).Waiting()
		waiter := newStore(t, tiered.WithRedis(redis), tiered.WithSQL(st.SQLLayer(t)), tiered.WithLocalCache(0, 0, 0))
		k := newKey(t)
		started, finish := make(chan struct{}), make(chan struct{})
		type answer struct {
			r   tiered.Result
			err error
		}
		ownerDone := make(chan answer, 1)
		go func() {
			r, err := owner.Do(context.Background(), k, "fp", func(context.Context) ([]byte, error) {
				close(started)
				<-finish
				return []byte("paid"), nil
			})
			ownerDone <- answer{r, err}
		}()
		<-started
		waiterDone := make(chan answer, 1)
		go func() {
			r, err := waiter.Do(context.Background(), k, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
			waiterDone <- answer{r, err}
		}()
		eventually(t, func() error {
			if redis.Calls(faultlayer.Wait) == 0 {
				return errors.New("the duplicate never waited for Redis's signal")
			}
			return nil
		})
		close(finish)
		if a := <-ownerDone; a.err != nil || string(a.r.Value) != "paid" {
			t.Fatalf("owner: %+v, %v", a.r, a.err)
		}
		a := <-waiterDone
		if a.err != nil || !a.r.Replayed || !a.r.Waited || string(a.r.Value) != "paid" {
			t.Fatalf("waiter: %+v, %v; want the owner's result after a wait", a.r, a.err)
		}
	})
}

// A Store that has seen mostly new keys and then gets duplicates stops
// sending SQL claims alongside Redis's: duplicates Redis answers cost the
// database nothing again.
func TestDuplicatesStopOverlappingClaims(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		s, _, sql := faulted(t, st)
		newKeys(t, s, 40)
		owner := st.Store(t)
		keys := make([]idem.Key, 60)
		for i := range keys {
			keys[i] = newKey(t)
			if _, err := owner.Do(t.Context(), keys[i], "fp", func(context.Context) ([]byte, error) { return []byte("done"), nil }); err != nil {
				t.Fatal(err)
			}
		}
		_ = owner.Close() // its results are in Redis once it closed
		before := sql.Calls(faultlayer.Reserve)
		var late int64
		for i, k := range keys {
			if i == 40 {
				late = sql.Calls(faultlayer.Reserve)
			}
			var c counter
			r, err := s.Do(t.Context(), k, "fp", c.fn("again"))
			if err != nil || !r.Replayed || r.Tier != idem.TierRedis || string(r.Value) != "done" || c.runs.Load() != 0 {
				t.Fatalf("duplicate %d: %+v, %v, runs %d; want a Redis replay", i, r, err, c.runs.Load())
			}
		}
		if n := sql.Calls(faultlayer.Reserve) - late; n != 0 {
			t.Fatalf("the last 20 duplicates sent %d SQL claims; want none", n)
		}
		if n := late - before; n > 40 {
			t.Fatalf("the first 40 duplicates sent %d SQL claims", n)
		}
	})
}

// A claim SQL granted ahead while Redis answered on its own (Redis holds a
// result SQL no longer has) is released: the key is not held by nobody
// until the lease lapses.
func TestDroppedSQLClaimIsReleased(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		s, _, sql := faulted(t, st)
		newKeys(t, s, 3)
		k := newKey(t)
		// Redis alone knows the key's result.
		redisOnly := newStore(t, tiered.WithRedis(st.RedisLayer(t)))
		if _, err := redisOnly.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return []byte("kept"), nil }); err != nil {
			t.Fatal(err)
		}
		_ = redisOnly.Close()
		reserves := sql.Calls(faultlayer.Reserve)
		r, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if err != nil || !r.Replayed || r.Tier != idem.TierRedis || string(r.Value) != "kept" {
			t.Fatalf("duplicate: %+v, %v; want Redis's result", r, err)
		}
		if sql.Calls(faultlayer.Reserve) == reserves {
			t.Fatal("no SQL claim was sent ahead: the test proves nothing")
		}
		_ = s.Close() // waits for the release
		if n := sql.Calls(faultlayer.Release); n != 1 {
			t.Fatalf("SQL releases: %d, want 1", n)
		}
		if _, err := st.SQLLayer(t).Get(t.Context(), k); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("SQL after the duplicate: %v; want no record", err)
		}
	})
}
