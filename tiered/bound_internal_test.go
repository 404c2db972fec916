package tiered

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type ctxKey struct{}

func TestBoundsDeadlineWithinTimeout(t *testing.T) {
	const timeout = 160 * time.Millisecond
	b := newBounds(timeout)
	vals := context.WithoutCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	var slots int
	var last context.Context
	start := time.Now()
	for now := start; now.Before(start.Add(3 * timeout)); now = now.Add(timeout / 100) {
		ctx, cancel := b.call(vals, now)
		cancel() // a no-op for a shared slot: the context must still be usable
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if left := dl.Sub(now); left > timeout || left <= timeout-timeout/boundSlots {
			t.Fatalf("deadline %v after the call's start, want in (%v, %v]", left, timeout-timeout/boundSlots, timeout)
		}
		if ctx.Value(ctxKey{}) != "v" {
			t.Fatal("the call's values are lost")
		}
		if sc := ctx.(*boundCtx).deadline; sc != last {
			slots++
			last = sc
		}
	}
	// 300 calls over 3 timeouts: a slot spans a sixteenth of the timeout
	// (6.25 steps, so 7 calls), 43 slots in all, not 300 timers.
	if want := (300 + 6) / 7; slots != want {
		t.Fatalf("%d slots for 3 timeouts, want %d", slots, want)
	}
}

func TestBoundsSharedContextEnds(t *testing.T) {
	b := newBounds(50 * time.Millisecond)
	ctx, _ := b.call(context.Background(), time.Now())
	if ctx.Err() != nil {
		t.Fatal("ended at once")
	}
	// A context derived from it, as a driver derives one per query, ends
	// with it, without a goroutine of its own.
	before := runtime.NumGoroutine()
	child, stop := context.WithCancel(ctx)
	defer stop()
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("deriving started %d goroutines", n-before)
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the derived context did not end with the shared deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("errors %v / %v, want deadline exceeded", ctx.Err(), context.Cause(child))
	}
}

func TestBoundsCancellableContextGetsItsOwnTimer(t *testing.T) {
	b := newBounds(time.Hour)
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := b.call(parent, time.Now())
	defer cancel()
	if _, shared := ctx.(*boundCtx); shared {
		t.Fatal("a cancellable context must keep its cancellation: not a shared slot")
	}
	cancelParent()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err %v after the caller cancelled, want context.Canceled", ctx.Err())
	}
	dl, cancelDL := context.WithTimeout(context.Background(), time.Minute)
	defer cancelDL()
	ctx2, cancel2 := b.call(dl, time.Now())
	defer cancel2()
	if d, _ := ctx2.Deadline(); time.Until(d) > time.Minute {
		t.Fatal("an earlier deadline of the caller's was lost")
	}
}
