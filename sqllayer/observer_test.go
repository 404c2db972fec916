package sqllayer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// A claim that takes over an expired lease is reported to the observer of
// the call's context (a Store hands its own down so; a caller of the layer
// itself puts its own there), so operators can count crashed or stalled
// owners.
func TestObserverSeesTakeover(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		var takeovers atomic.Int32
		obs := idem.ObserverFunc(func(_ context.Context, e idem.Event) {
			if e.Kind == idem.EventTakeover {
				takeovers.Add(1)
			}
		})
		l, _ := b.layer(t)
		observed := func(t *testing.T) context.Context { return idem.ContextWithObserver(ctx(t), obs) }
		k := idem.NewKey("observer", testenv.Name("k"))
		if _, claimed, err := l.Reserve(observed(t), k, "fp", 300*time.Millisecond, time.Hour); err != nil || !claimed {
			t.Fatalf("first claim: %v, %v", claimed, err)
		}
		if takeovers.Load() != 0 {
			t.Fatal("a first claim was reported as a takeover")
		}
		time.Sleep(700 * time.Millisecond)
		if _, claimed, err := l.Reserve(observed(t), k, "fp", 300*time.Millisecond, time.Hour); err != nil || claimed {
			t.Fatalf("Reserve after the lease: %v, %v, want the owner's grace", claimed, err)
		}
		if takeovers.Load() != 0 {
			t.Fatal("a grace was reported as a takeover")
		}
		time.Sleep(300 * time.Millisecond) // past the grace
		if _, claimed, err := l.Reserve(observed(t), k, "fp", time.Minute, time.Hour); err != nil || !claimed {
			t.Fatalf("claim after the grace: %v, %v", claimed, err)
		}
		if n := takeovers.Load(); n != 1 {
			t.Fatalf("%d takeover events, want 1", n)
		}
	})
}
