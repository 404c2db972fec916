package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// slots is how many slots one timeout spans: a call's deadline is at most
// its timeout from its start and at most timeout/slots less.
const slots = 16

// Bound hands out the deadline of calls bounded by one timeout. Calls that
// start within the same slot (a sixteenth of the timeout) share one timer
// context whose deadline is the slot's start plus the timeout, so every
// call gets at most its timeout and at least fifteen sixteenths of it.
// (Never more: a callee with the same timeout of its own then adds no timer
// either.)
//
// The slot contexts descend from context.Background, not from whatever
// owns the Bound: like the per-call timeouts they replace, nothing but the
// deadline cuts a call short. Their timers fire on their own; nothing needs
// stopping. A Bound is safe for concurrent use.
type Bound struct {
	timeout time.Duration
	slot    time.Duration
	cur     atomic.Pointer[slot]
	mu      sync.Mutex // serialises making a slot
}

type slot struct {
	ctx    context.Context
	until  time.Time          // calls that start before until use ctx
	cancel context.CancelFunc // kept for vet; the deadline ends ctx
}

// New returns a Bound for calls of at most timeout. A timeout of 0 bounds
// nothing: its contexts are the callers' own.
func New(timeout time.Duration) *Bound {
	return &Bound{timeout: timeout, slot: max(timeout/slots, time.Nanosecond)}
}

// Timeout returns the timeout b bounds calls by; 0 for none.
func (b *Bound) Timeout() time.Duration { return b.timeout }

// Context returns the context for one call made now (a reading of the
// clock taken just before it) on behalf of ctx, and its cancel. A ctx
// without cancellation or deadline (see [Detached]) gets a shared slot,
// whose cancel does nothing; any other gets its own timer. Without a
// timeout ctx is returned as it is.
func (b *Bound) Context(ctx context.Context, now time.Time) (context.Context, context.CancelFunc) {
	return b.ContextIn(ctx, now, nil)
}

// ContextIn is Context, with the shared slot's context for ctx made in into
// when into is not nil, rather than allocated. into must not be in use: a
// callee may hold the context it was given until its call returns, and the
// context must not change meanwhile.
func (b *Bound) ContextIn(ctx context.Context, now time.Time, into *Ctx) (context.Context, context.CancelFunc) {
	if b.timeout == 0 {
		return ctx, noCancel
	}
	if !Detached(ctx) {
		return context.WithDeadline(ctx, now.Add(b.timeout))
	}
	sl := b.cur.Load()
	if sl == nil || !now.Before(sl.until) {
		sl = b.next(now)
	}
	if into == nil {
		into = new(Ctx)
	}
	*into = Ctx{Context: ctx, deadline: sl.ctx}
	return into, noCancel
}

func noCancel() {}

// next starts the slot that now falls in, unless another call just did.
func (b *Bound) next(now time.Time) *slot {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sl := b.cur.Load(); sl != nil && now.Before(sl.until) {
		return sl
	}
	// The timer ends the slot's context; cancelling it earlier would cut
	// short the calls still using it.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(b.timeout))
	until := now.Add(b.slot)
	sl := &slot{ctx: ctx, until: until, cancel: cancel}
	b.cur.Store(sl)
	return sl
}

// Ctx is a call's values with a shared deadline: Deadline, Done and Err
// come from the slot's context, values from the call's (the embedded
// Context, nil in a Ctx never used). Its zero value is storage for
// [Bound.ContextIn].
type Ctx struct {
	context.Context
	deadline context.Context
}

// Deadline returns the slot's deadline.
func (c *Ctx) Deadline() (time.Time, bool) { return c.deadline.Deadline() }

// Done returns the slot's Done channel: it is closed at the deadline.
func (c *Ctx) Done() <-chan struct{} { return c.deadline.Done() }

// Err returns the slot's error: context.DeadlineExceeded once it passed.
func (c *Ctx) Err() error { return c.deadline.Err() }

// AfterFunc lets contexts derived from c (a driver's per-query watch, say)
// hang off the slot's context instead of each starting a goroutine.
func (c *Ctx) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.deadline, f)
}

// Detached reports whether ctx can neither be cancelled nor run out: a
// context that only carries values (context.Background, what
// context.WithoutCancel returns), which a shared slot may bound.
func Detached(ctx context.Context) bool {
	if ctx.Done() != nil {
		return false
	}
	_, ok := ctx.Deadline()
	return !ok
}
