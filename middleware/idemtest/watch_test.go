package idemtest

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
)

// waiting is a layer with the optional interfaces, as the Redis layer has.
type waiting interface {
	idem.Waiter
	idem.Filler
}

func TestWatchedKeepsOptionalInterfaces(t *testing.T) {
	busy := make(chan struct{}, 1)
	plain := watched(must.Get(memlayer.New())(t), busy)
	if _, ok := plain.(waiting); ok {
		t.Fatal("a plain layer gained Wait and Fill")
	}
	// faultlayer's Waiting form passes Wait and Fill through.
	wf := faultlayer.New(must.Get(memlayer.New())(t)).Waiting()
	if _, ok := watched(wf, busy).(waiting); !ok {
		t.Fatal("a waiting layer lost Wait or Fill")
	}
	if l := watched(wf, nil); l != idem.Layer(wf) {
		t.Fatal("a layer nobody watches was wrapped")
	}
	ctx := t.Context()
	key := idem.NewKey("", "k")
	if _, _, err := plain.Reserve(ctx, key, "fp", 1e9, 1e9); err != nil {
		t.Fatal(err)
	}
	if _, _, err := plain.Reserve(ctx, key, "fp", 1e9, 1e9); err != nil {
		t.Fatal(err)
	}
	select {
	case <-busy:
	default:
		t.Fatal("a Reserve that found the key in progress was not reported")
	}
}
