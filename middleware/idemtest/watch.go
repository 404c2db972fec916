package idemtest

import (
	"context"
	"time"

	"github.com/idemkit/idem"
)

// watch wraps a layer and reports every Reserve that found the key in
// progress: the caller is about to wait. Rows use it to know, without
// sleeping, that a duplicate is waiting.
type watch struct {
	idem.Layer
	busy chan<- struct{}
}

func (l *watch) Reserve(ctx context.Context, key idem.Key, fp string, lease, ttl time.Duration) (idem.Record, bool, error) {
	rec, claimed, err := l.Layer.Reserve(ctx, key, fp, lease, ttl)
	if err == nil && !claimed && rec.State == idem.StateInProgress {
		select {
		case l.busy <- struct{}{}:
		default:
		}
	}
	return rec, claimed, err
}

// watchWF is a watch over a layer that is also an idem.Waiter and Filler.
type watchWF struct {
	*watch
	wf interface {
		idem.Waiter
		idem.Filler
	}
}

func (l watchWF) Wait(ctx context.Context, key idem.Key) (idem.Record, error) {
	return l.wf.Wait(ctx, key)
}

func (l watchWF) Fill(ctx context.Context, rec idem.Record, ttl time.Duration) error {
	return l.wf.Fill(ctx, rec, ttl)
}

// watched returns l wrapped so that busy receives when a Reserve finds the
// key in progress, keeping l's optional interfaces; l itself when busy is
// nil.
func watched(l idem.Layer, busy chan<- struct{}) idem.Layer {
	if l == nil || busy == nil {
		return l
	}
	w := &watch{Layer: l, busy: busy}
	if wf, ok := l.(interface {
		idem.Waiter
		idem.Filler
	}); ok {
		return watchWF{watch: w, wf: wf}
	}
	return w
}
