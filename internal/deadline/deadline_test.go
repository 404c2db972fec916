package deadline

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type ctxKey struct{}

func TestDeadlineWithinTimeout(t *testing.T) {
	const timeout = 160 * time.Millisecond
	b := New(timeout)
	vals := context.WithoutCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	var made int
	var last context.Context
	start := time.Now()
	for now := start; now.Before(start.Add(3 * timeout)); now = now.Add(timeout / 100) {
		ctx, cancel := b.Context(vals, now)
		cancel() // a no-op for a shared slot: the context must still be usable
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if left := dl.Sub(now); left > timeout || left <= timeout-timeout/slots {
			t.Fatalf("deadline %v after the call's start, want in (%v, %v]", left, timeout-timeout/slots, timeout)
		}
		if ctx.Value(ctxKey{}) != "v" {
			t.Fatal("the call's values are lost")
		}
		if sc := ctx.(*Ctx).deadline; sc != last {
			made++
			last = sc
		}
	}
	// 300 calls over 3 timeouts: a slot spans a sixteenth of the timeout
	// (6.25 steps, so 7 calls), 43 slots in all, not 300 timers.
	if want := (300 + 6) / 7; made != want {
		t.Fatalf("%d slots for 3 timeouts, want %d", made, want)
	}
}

func TestSharedContextEnds(t *testing.T) {
	b := New(50 * time.Millisecond)
	ctx, _ := b.Context(context.Background(), time.Now())
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

func TestCancellableContextGetsItsOwnTimer(t *testing.T) {
	b := New(time.Hour)
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := b.Context(parent, time.Now())
	defer cancel()
	if _, shared := ctx.(*Ctx); shared {
		t.Fatal("a cancellable context must keep its cancellation: not a shared slot")
	}
	cancelParent()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err %v after the caller cancelled, want context.Canceled", ctx.Err())
	}
	dl, cancelDL := context.WithTimeout(context.Background(), time.Minute)
	defer cancelDL()
	ctx2, cancel2 := b.Context(dl, time.Now())
	defer cancel2()
	if d, _ := ctx2.Deadline(); time.Until(d) > time.Minute {
		t.Fatal("an earlier deadline of the caller's was lost")
	}
}

// Without a timeout a call keeps the caller's context as it is, and with
// one a shared slot's context is made in the storage the caller lends.
func TestNoTimeoutAndLentStorage(t *testing.T) {
	vals := context.WithValue(context.Background(), ctxKey{}, "v")
	if ctx, cancel := New(0).Context(vals, time.Now()); ctx != vals {
		cancel()
		t.Fatal("a Bound without a timeout changed the context")
	}
	var into Ctx
	if into.Context != nil {
		t.Fatal("unused storage holds a context")
	}
	ctx, cancel := New(time.Minute).ContextIn(vals, time.Now(), &into)
	defer cancel()
	if ctx != &into || into.Value(ctxKey{}) != "v" {
		t.Fatalf("got %T, want the lent storage with the call's values", ctx)
	}
	if !Detached(vals) || Detached(ctx) {
		t.Fatal("Detached: a context of values only is detached, one with a deadline is not")
	}
}
