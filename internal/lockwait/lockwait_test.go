package lockwait_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/lockwait"
)

func TestBound(t *testing.T) {
	if _, ok := lockwait.Bound(context.Background()); ok {
		t.Fatal("a context with no deadline and no wait bounds the lock wait")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if w, ok := lockwait.Bound(ctx); !ok || w > 3*time.Second || w < 2*time.Second {
		t.Fatalf("a 4s deadline: %v, %v; want about 3s", w, ok)
	}
	if w, ok := lockwait.Bound(lockwait.With(ctx, time.Now().Add(time.Second))); !ok || w > time.Second {
		t.Fatalf("a 1s wait under a 4s deadline: %v, %v; want at most 1s", w, ok)
	}
	if got := lockwait.With(ctx, time.Now().Add(time.Minute)); got != ctx {
		t.Fatal("a wait past the deadline added a value")
	}
	if w, ok := lockwait.Bound(lockwait.With(context.Background(), time.Now().Add(-time.Second))); !ok || w != 0 {
		t.Fatalf("a wait already over: %v, %v; want 0", w, ok)
	}
}
