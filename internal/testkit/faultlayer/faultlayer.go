package faultlayer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// Method names a Layer method.
type Method int

// The methods of idem.Layer (and the optional Wait and Fill).
const (
	Reserve Method = iota
	Complete
	Release
	Renew
	Get
	Wait
	Fill
	numMethods
)

var methodNames = [...]string{"Reserve", "Complete", "Release", "Renew", "Get", "Wait", "Fill"}

func (m Method) String() string { return methodNames[m] }

// Layer is a fault-injecting idem.Layer over Inner. The zero fault set
// passes every call through. It also implements idem.Waiter and idem.Filler
// when Inner does.
type Layer struct {
	Inner idem.Layer

	calls [numMethods]atomic.Int64

	mu     sync.Mutex // guards faults
	faults [numMethods]fault
}

type fault struct {
	err   error         // returned instead of calling Inner
	delay time.Duration // slept (bounded by ctx) before the call
	hook  func(ctx context.Context) error
}

// New wraps inner.
func New(inner idem.Layer) *Layer { return &Layer{Inner: inner} }

// Unwrap returns Inner: a reservation the wrapped layer holds is one Inner
// holds, and Inner may complete it in a transaction (see
// sqllayer.Layer.CompleteReservation).
func (l *Layer) Unwrap() idem.Layer { return l.Inner }

// Calls returns how many times m was called (faulted calls included).
func (l *Layer) Calls(m Method) int64 { return l.calls[m].Load() }

// Fail makes every call of the given methods return err (nil clears).
// With no methods it applies to all.
func (l *Layer) Fail(err error, ms ...Method) { l.set(func(f *fault) { f.err = err }, ms) }

// Delay makes every call of the given methods wait d first, or until its
// context ends (then it returns the context's error, as a slow server
// would). With no methods it applies to all.
func (l *Layer) Delay(d time.Duration, ms ...Method) { l.set(func(f *fault) { f.delay = d }, ms) }

// Hook runs h before each call of m; a non-nil error from h is returned
// instead of calling Inner. nil clears.
func (l *Layer) Hook(m Method, h func(ctx context.Context) error) {
	l.set(func(f *fault) { f.hook = h }, []Method{m})
}

// Down makes every call fail with idem.ErrUnavailable, as a dead server
// would; Up clears every fault.
func (l *Layer) Down() { l.Fail(fmt.Errorf("%w: injected fault", idem.ErrUnavailable)) }

// Up clears every fault.
func (l *Layer) Up() {
	l.mu.Lock()
	l.faults = [numMethods]fault{}
	l.mu.Unlock()
}

func (l *Layer) set(apply func(*fault), ms []Method) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ms) == 0 {
		for i := range l.faults {
			apply(&l.faults[i])
		}
		return
	}
	for _, m := range ms {
		apply(&l.faults[m])
	}
}

// enter counts the call and applies m's faults.
func (l *Layer) enter(ctx context.Context, m Method) error {
	l.calls[m].Add(1)
	l.mu.Lock()
	f := l.faults[m]
	l.mu.Unlock()
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", idem.ErrUnavailable, ctx.Err())
		}
	}
	if f.hook != nil {
		if err := f.hook(ctx); err != nil {
			return err
		}
	}
	return f.err
}

// Reserve implements idem.Layer.
func (l *Layer) Reserve(ctx context.Context, key idem.Key, fp string, lease, ttl time.Duration) (idem.Record, bool, error) {
	if err := l.enter(ctx, Reserve); err != nil {
		return idem.Record{}, false, err
	}
	return l.Inner.Reserve(ctx, key, fp, lease, ttl)
}

// Complete implements idem.Layer.
func (l *Layer) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if err := l.enter(ctx, Complete); err != nil {
		return err
	}
	return l.Inner.Complete(ctx, key, token, result, ttl)
}

// Release implements idem.Layer.
func (l *Layer) Release(ctx context.Context, key idem.Key, token string) error {
	if err := l.enter(ctx, Release); err != nil {
		return err
	}
	return l.Inner.Release(ctx, key, token)
}

// Renew implements idem.Layer.
func (l *Layer) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	if err := l.enter(ctx, Renew); err != nil {
		return err
	}
	return l.Inner.Renew(ctx, key, token, lease)
}

// Get implements idem.Layer.
func (l *Layer) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if err := l.enter(ctx, Get); err != nil {
		return idem.Record{}, err
	}
	return l.Inner.Get(ctx, key)
}

// Waiting returns a wrapper that also implements idem.Waiter and idem.Filler
// by passing through to Inner (which must implement them).
func (l *Layer) Waiting() *WaitingLayer { return &WaitingLayer{l} }

// WaitingLayer is a Layer whose Inner implements idem.Waiter and
// idem.Filler.
type WaitingLayer struct{ *Layer }

var (
	_ idem.Layer   = (*Layer)(nil)
	_ idem.Waiter  = (*WaitingLayer)(nil)
	_ idem.Filler  = (*WaitingLayer)(nil)
	_ atomicRunner = (*AtomicLayer)(nil)
)

// Wait implements idem.Waiter.
func (l *WaitingLayer) Wait(ctx context.Context, key idem.Key) (idem.Record, error) {
	if err := l.enter(ctx, Wait); err != nil {
		return idem.Record{}, err
	}
	return l.Inner.(idem.Waiter).Wait(ctx, key)
}

// Fill implements idem.Filler.
func (l *WaitingLayer) Fill(ctx context.Context, rec idem.Record, ttl time.Duration) error {
	if err := l.enter(ctx, Fill); err != nil {
		return err
	}
	return l.Inner.(idem.Filler).Fill(ctx, rec, ttl)
}

// atomicRunner is the method of a deciding layer that runs an execution in
// one transaction of its database (tiered.AtomicLayer's, as
// *sqllayer.Layer has it).
type atomicRunner interface {
	RunAtomic(ctx context.Context, key idem.Key, fingerprint string, lease, ttl, wait, timeout time.Duration,
		work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error)
}

// Atomic returns a wrapper that also implements tiered.AtomicLayer by
// passing RunAtomic through to Inner, which must have it (ok is false when
// it does not). The faults stay where the calls go: Reserve's (and its
// count) apply to the claim before the transaction begins, Complete's to
// the completion the work writes in the transaction — a failed completion
// rolls the execution back, as a database refusing it would.
func (l *Layer) Atomic() (a *AtomicLayer, ok bool) {
	if _, ok := l.Inner.(atomicRunner); !ok {
		return nil, false
	}
	return &AtomicLayer{l}, true
}

// AtomicLayer is a Layer whose Inner runs atomic executions.
type AtomicLayer struct{ *Layer }

// RunAtomic implements tiered.AtomicLayer.
func (l *AtomicLayer) RunAtomic(ctx context.Context, key idem.Key, fingerprint string, lease, ttl, wait, timeout time.Duration,
	work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error) {
	if err := l.enter(ctx, Reserve); err != nil {
		return idem.Record{}, false, err
	}
	return l.Inner.(atomicRunner).RunAtomic(ctx, key, fingerprint, lease, ttl, wait, timeout,
		func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error {
			return work(ctx, rec, func(result []byte) error {
				if err := l.enter(ctx, Complete); err != nil {
					return err
				}
				return complete(result)
			})
		})
}
