package observe_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/observe"
)

// The observer a context carries is found on it and on the contexts
// derived from it; a context that carries none gives nil.
func TestObserverOnContext(t *testing.T) {
	var got []idem.Event
	o := idem.ObserverFunc(func(_ context.Context, e idem.Event) { got = append(got, e) })
	ctx, cancel := context.WithCancel(observe.NewContext(context.Background(), o))
	defer cancel()
	found := observe.FromContext(ctx)
	if found == nil {
		t.Fatal("no observer on a derived context")
	}
	found.Observe(ctx, idem.Event{Kind: idem.EventGrace})
	if len(got) != 1 || got[0].Kind != idem.EventGrace {
		t.Fatalf("the observer found is not the one given: %v", got)
	}
	if observe.FromContext(context.Background()) != nil {
		t.Fatal("an observer on a context that carries none")
	}
}
