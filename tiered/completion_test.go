package tiered_test

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

// A result too large for the deciding tier completes the key with the
// marker that says so: the work ran once and never runs again; every
// caller is told the result cannot be replayed.
func TestTooLargeResultIsNotReplayable(t *testing.T) {
	for _, mode := range []string{"sql", "redis"} {
		t.Run(mode, func(t *testing.T) {
			layer := newMem(t)
			opt := tiered.WithSQL(layer)
			if mode == "redis" {
				opt = tiered.WithRedis(layer)
			}
			const lease = 200 * time.Millisecond
			a := newStore(t, opt, tiered.WithLease(lease), tiered.WithLocalCache(0, 0, 0))
			b := newStore(t, opt, tiered.WithLease(lease))
			k := newKey(t)
			var runs atomic.Int64
			fn := func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte(strings.Repeat("x", idem.MaxResult+1)), nil
			}
			r, err := a.Do(t.Context(), k, "fp", fn)
			if !errors.Is(err, tiered.ErrNotReplayable) || !errors.Is(err, idem.ErrTooLarge) || len(r.Value) != idem.MaxResult+1 {
				t.Fatalf("owner: %d bytes, %v; want the value and ErrNotReplayable", len(r.Value), err)
			}
			time.Sleep(2 * lease) // past any lease: nothing may take the key over
			for i := range 2 {    // the second answer comes from b's local cache
				if _, err := b.Do(t.Context(), k, "fp", fn); !errors.Is(err, tiered.ErrNotReplayable) {
					t.Fatalf("retry %d: %v, want ErrNotReplayable", i, err)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("fn ran %d times", runs.Load())
			}
		})
	}
}

// When the deciding tier is unreachable at completion, the Store keeps
// completing in the background: a result survives an outage that ends
// before anyone takes the key over. The owner's caller is told that its
// result is not stored yet (it is not a success until it is).
func TestCompletionSurvivesOutage(t *testing.T) {
	const lease = time.Second
	shared := newMem(t)
	sql := faultlayer.New(shared)
	rec := newRecorder()
	a := newStore(t, tiered.WithSQL(sql), tiered.WithLease(lease), tiered.WithObserver(rec))
	k := newKey(t)
	down := fmt.Errorf("%w: failover", idem.ErrUnavailable)
	var runs atomic.Int64
	back := make(chan struct{})
	r, err := a.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
		runs.Add(1)
		sql.Fail(down, faultlayer.Complete, faultlayer.Renew, faultlayer.Release)
		time.AfterFunc(900*time.Millisecond, func() {
			sql.Fail(nil, faultlayer.Complete, faultlayer.Renew, faultlayer.Release)
			close(back)
		})
		return []byte("charged"), nil
	})
	if !errors.Is(err, idem.ErrUnavailable) || string(r.Value) != "charged" {
		t.Fatalf("owner: %+v, %v; want its value and ErrUnavailable", r, err)
	}
	<-back
	// The background completion lands within a few short pauses.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := shared.Get(t.Context(), k)
		if err == nil && got.Completed() {
			if string(got.Result) != "charged" {
				t.Fatalf("stored %q", got.Result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the result was never completed: %+v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := newStore(t, tiered.WithSQL(shared), tiered.WithLease(lease))
	r, err = b.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { runs.Add(1); return []byte("again"), nil })
	if err != nil || string(r.Value) != "charged" || runs.Load() != 1 {
		t.Fatalf("retry: %+v, %v, runs %d", r, err, runs.Load())
	}
	if rec.count("tier_error/sql") == 0 {
		t.Fatal("the failed completion was not reported")
	}
}
