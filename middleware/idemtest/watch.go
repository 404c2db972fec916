package idemtest

import (
	"context"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
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

// watchAtomic is a watch over a layer that runs atomic executions: a claim
// that finds the key in progress reports it as Reserve does.
type watchAtomic struct {
	*watch
	a tiered.AtomicLayer
}

func (l watchAtomic) RunAtomic(ctx context.Context, key idem.Key, fp string, lease, ttl, wait, timeout time.Duration,
	work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error) {
	rec, claimed, err := l.a.RunAtomic(ctx, key, fp, lease, ttl, wait, timeout, work)
	if err == nil && !claimed && rec.State == idem.StateInProgress {
		select {
		case l.busy <- struct{}{}:
		default:
		}
	}
	return rec, claimed, err
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
	if a, ok := l.(tiered.AtomicLayer); ok {
		return watchAtomic{watch: w, a: a}
	}
	return w
}
