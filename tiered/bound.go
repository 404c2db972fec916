package tiered

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// boundSlots is how many slots one timeout spans: a call's deadline is at
// most its timeout from now and at most timeout/boundSlots less.
const boundSlots = 16

// bounds hands out the deadline of one call to a tier without a timer per
// call. Calls that start within the same slot (a sixteenth of the timeout)
// share one timer context whose deadline is the slot's start plus the
// timeout, so every call gets at most its timeout and at least fifteen
// sixteenths of it. (Never more: a layer with the same timeout of its own
// then adds no timer either.) context.WithTimeout per call costs a timer
// start and stop and four allocations; on a replay that was a tenth of the
// Store's own work.
//
// The slot contexts descend from context.Background, not from the Store:
// like the per-call timeouts they replace, Close does not cut a tier call
// short (Close reaches the phases through stopped). Their timers fire on
// their own; nothing needs stopping.
type bounds struct {
	timeout time.Duration
	slot    time.Duration
	cur     atomic.Pointer[boundSlot]
	mu      sync.Mutex // serialises making a slot
}

type boundSlot struct {
	ctx    context.Context
	until  time.Time          // calls that start before until use ctx
	cancel context.CancelFunc // kept for vet; the deadline ends ctx
}

func newBounds(timeout time.Duration) *bounds {
	return &bounds{timeout: timeout, slot: max(timeout/boundSlots, time.Nanosecond)}
}

// call returns the context for one call to the tier made now (a reading of
// the clock taken just before it) on behalf of ctx, and its cancel. A ctx
// without cancellation or deadline (the phases run on the caller's values,
// detached: see Store.Do) gets a shared slot; any other gets its own timer.
// Without a timeout (0: no bound of the Store's own) ctx is returned as it
// is.
func (b *bounds) call(ctx context.Context, now time.Time) (context.Context, context.CancelFunc) {
	return b.callIn(ctx, now, nil)
}

// callIn is call, with the shared slot's context for ctx made in into when
// into is not nil, rather than allocated. into must not be in use: a layer
// may hold the context it was given until its call returns, and the
// context must not change meanwhile.
func (b *bounds) callIn(ctx context.Context, now time.Time, into *boundCtx) (context.Context, context.CancelFunc) {
	if b.timeout == 0 {
		return ctx, noCancel
	}
	if !detached(ctx) {
		return context.WithDeadline(ctx, now.Add(b.timeout))
	}
	sl := b.cur.Load()
	if sl == nil || !now.Before(sl.until) {
		sl = b.next(now)
	}
	if into == nil {
		into = new(boundCtx)
	}
	*into = boundCtx{Context: ctx, deadline: sl.ctx}
	return into, noCancel
}

func noCancel() {}

// next starts the slot that now falls in, unless another call just did.
func (b *bounds) next(now time.Time) *boundSlot {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sl := b.cur.Load(); sl != nil && now.Before(sl.until) {
		return sl
	}
	// The timer ends the slot's context; cancelling it earlier would cut
	// short the calls still using it.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(b.timeout))
	until := now.Add(b.slot)
	sl := &boundSlot{ctx: ctx, until: until, cancel: cancel}
	b.cur.Store(sl)
	return sl
}

// boundCtx is a call's values with a shared deadline: Deadline, Done and Err
// come from the slot's context, values from the call's.
type boundCtx struct {
	context.Context
	deadline context.Context
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.deadline.Deadline() }
func (c *boundCtx) Done() <-chan struct{}       { return c.deadline.Done() }
func (c *boundCtx) Err() error                  { return c.deadline.Err() }

// AfterFunc lets contexts derived from c (a driver's per-query watch, say)
// hang off the slot's context instead of each starting a goroutine.
func (c *boundCtx) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.deadline, f)
}
