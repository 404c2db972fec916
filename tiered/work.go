package tiered

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemkit/idem"
)

// work runs fn as the owner of the call's claims (SQL's, Redis's, or none
// under WithFailOpen), keeping them alive while fn runs and afterwards until
// the deciding tier has accepted or refused its result, then completes or
// releases them.
func (c *call) work(tier idem.Tier) outcome {
	s := c.s
	h := c.hold()
	now := c.now()
	if h.claimed() && h.expiry.Sub(now) < s.cfg.lease/3 {
		// The claim's answer came late: too little of the lease is left to
		// start the work safely. Renew first, or give the claim up.
		if decided, lost := h.renew(); lost || !decided {
			c.release()
			err := fmt.Errorf("%w: the claim's answer came too late to start the work", idem.ErrLeaseLost)
			c.observe(idem.EventLeaseLost, tier, 0, err)
			return outcome{result: Result{Tier: tier}, err: err}
		}
		now = time.Now()
	}
	// The work ends with the Store: Close cancels it (cause idem.ErrClosed)
	// through the table of calls in flight, which holds this call, rather
	// than through a child registered with the Store's context for every
	// execution. A Close that did not find the cancel there has set closed
	// before this reads it.
	workCtx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	c.s.flights.setWork(c, cancel)
	if s.closed.Load() {
		cancel(idem.ErrClosed)
	}
	fnCtx := context.Context(workCtx)
	if tier != idem.TierNone && h.claimed() {
		// A deciding tier claimed the key: fn may read its reservation,
		// and complete it in a transaction of its own.
		fnCtx, h.owner = c.reserve(workCtx, h)
		h.reserved = true
	}
	r := h.renewWhile(cancel)
	returned := false
	defer func() {
		if !returned {
			// fn called runtime.Goexit, which is neither a return nor a
			// panic (DESIGN §9): this goroutine is unwinding and work will
			// never return. End the execution here as if fn had failed
			// with ErrGoexit, so that renewal stops and the claims are
			// released (or what fn's transaction committed is kept); lead,
			// unwinding too, hands the outcome to whoever waits.
			c.out = c.settle(h, r, workCtx, nil, ErrGoexit, tier, now)
		}
	}()
	val, err := runFn(fnCtx, c.fn)
	returned = true
	return c.settle(h, r, workCtx, val, err, tier, now)
}

// settle ends an execution whose fn returned val and err (or ended
// otherwise: see work): it stops the renewal r, then completes the claims
// with the result or releases them. workCtx is the work's context; began is
// a reading of the clock taken as fn started.
func (c *call) settle(h *hold, r *renewal, workCtx context.Context, val []byte, err error, tier idem.Tier, began time.Time) outcome {
	r.stop()
	end := c.now()
	took := end.Sub(began)
	if h.reserved {
		ending := h.owner.End()
		if ending.InTx {
			return c.settleInTx(h, ending, val, err, tier, took)
		}
		refused := ending.Refused
		if refused == nil && ending.Uncompleted && err == nil {
			// fn took its reservation to complete it in its transaction
			// and returned without a completion: that transaction did not
			// commit (it failed before completing), or fn never completed.
			// What fn answered was meant to commit with it: keep nothing.
			refused = errUncompleted
		}
		if refused != nil {
			// fn tried to complete in a transaction that could not hold
			// the completion (a mistake of setup or use): whatever it
			// returned, its result was meant to commit with that
			// transaction. Keep nothing; say what went wrong.
			if err != nil && !errors.Is(err, refused) {
				refused = errors.Join(refused, err)
			}
			c.release()
			c.observe(idem.EventReleased, tier, took, refused)
			return outcome{result: Result{Value: val, Tier: tier}, err: refused}
		}
	}
	if err != nil {
		if cause := context.Cause(workCtx); errors.Is(cause, idem.ErrLeaseLost) && errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", idem.ErrLeaseLost, err)
		}
		c.release()
		c.observe(idem.EventReleased, tier, took, err)
		return outcome{result: Result{Value: val, Tier: tier}, err: err}
	}
	// fn succeeded. Even if renewal gave up, complete: when no one took over,
	// the token still works and the result is kept; when someone did, the
	// layer says ErrLeaseLost and the winner's result stays.
	return c.finish(h, val, tier, took, end)
}

// finish completes the deciding claim with val and hands the result on to
// Redis and the local cache. The caller hears of success only once the
// deciding tier accepted the result; a completion still pending after half
// the lease goes on in the background, holding the lease. now is a reading
// of the clock taken as fn returned.
func (c *call) finish(h *hold, val []byte, tier idem.Tier, took time.Duration, now time.Time) outcome {
	s := c.s
	if !h.claimed() { // WithFailOpen with no claim anywhere: nothing to keep
		c.observe(idem.EventNew, tier, took, nil)
		return outcome{result: Result{Value: val, Tier: tier}}
	}
	stored := val
	accepted, err := h.complete(stored, now, now.Add(s.cfg.lease/2))
	if errors.Is(err, idem.ErrTooLarge) {
		// The work ran once; its result cannot be kept. Complete the key
		// with the marker that says so, so that retries never run it again.
		stored = tooLargeMarker
		now = time.Now()
		accepted, err = h.complete(stored, now, now.Add(s.cfg.lease/2))
	}
	switch {
	case err == nil:
	case errors.Is(err, idem.ErrLeaseLost):
		c.releaseRedis()
		c.observe(idem.EventLeaseLost, h.tier, took, err)
		return outcome{result: Result{Value: val, Tier: tier}, err: err}
	case s.stopped(c.ctx):
		return outcome{result: Result{Value: val, Tier: tier}, err: idem.ErrClosed}
	default:
		// The work ran and the token may still be good: a lapsed lease stays
		// the owner's until someone takes it over, and the layers give the
		// owner a grace before that. Keep completing, and holding the lease,
		// in the background rather than forget the result; the caller hears
		// that it is not stored yet.
		c.observe(idem.EventTierError, h.tier, took, err)
		c.finishLater(h, stored)
		if !errors.Is(err, idem.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", idem.ErrUnavailable, err)
		}
		return outcome{result: Result{Value: val, Tier: tier}, err: fmt.Errorf("%w: %w", ErrPending, err)}
	}
	c.stored(h, stored, accepted)
	c.observe(idem.EventNew, tier, took, nil)
	if isTooLargeMarker(stored) {
		return outcome{result: Result{Value: val, Tier: tier}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: val, Tier: tier}}
}

// stored hands a result the deciding tier accepted on to the other tiers:
// Redis (when SQL decided) and the local cache, neither for longer than the
// record lives. accepted is when the accepted completion was sent.
func (c *call) stored(h *hold, val []byte, accepted time.Time) {
	s := c.s
	lives := accepted.Add(s.cfg.retention)
	if h.tier == idem.TierSQL {
		c.publishLater(val, lives)
	}
	// The cache counts from when the completion was sent: its entry lives
	// no longer than from now would, never longer than the record.
	s.cache.put(c.key, c.fp(), val, lives, accepted)
}

// finishLater goes on completing the deciding claim in the background until
// the tier accepts the result, refuses the token (another owner took over:
// its result stands), or the Store closes. It holds the lease meanwhile.
func (c *call) finishLater(h *hold, val []byte) {
	s := c.s
	if !s.track() {
		return // closed meanwhile: the claim lapses after the lease
	}
	go func() {
		defer s.wg.Done()
		accepted, err := h.complete(val, time.Time{}, time.Time{})
		switch {
		case err == nil:
			c.stored(h, val, accepted)
		case errors.Is(err, idem.ErrLeaseLost):
			c.releaseRedis()
			c.observe(idem.EventLeaseLost, h.tier, 0, err)
		}
	}()
}

// publishLater publishes on a goroutine of its own: the caller is answered
// once SQL holds the result, and Redis learns it off the critical path. A
// duplicate that comes in between finds the key in progress in Redis, so
// SQL answers it; a waiter on another instance wakes when the result lands.
// After it the call's Redis claim belongs to that goroutine alone.
func (c *call) publishLater(val []byte, lives time.Time) {
	s := c.s
	if s.redis == nil || c.redisDown {
		return // nothing to publish to: see publish
	}
	if !s.track() {
		return // closing: the Redis claim lapses with its lease; SQL holds the result
	}
	go func() {
		defer s.wg.Done()
		c.publish(val, lives)
	}()
}

// publish puts a result SQL holds into Redis so that duplicates on other
// instances replay it (and their waiters wake): through this process's claim
// when it has one, else by back-filling. Redis keeps it no longer than
// lives, until when the SQL record surely lives by this process's clock.
// Best effort: SQL holds the result.
func (c *call) publish(val []byte, lives time.Time) {
	s := c.s
	if s.redis == nil || c.redisDown {
		// No Redis, or it failed this very call (its claim): a write that
		// only helps duplicates would most likely wait out its timeout
		// too, on the caller's time. SQL holds the result.
		return
	}
	if use, _ := s.health.allow(time.Now()); !use {
		return
	}
	now := time.Now()
	// The call may reach Redis up to its timeout after it was sent.
	ttl := lives.Sub(now) - s.cfg.redisTimeout
	if lives.IsZero() || ttl < time.Millisecond {
		c.releaseRedis() // too little left to be worth keeping
		return
	}
	redisCtx, cancel := s.redisBounds.Context(c.ctx, now)
	defer cancel()
	var err error
	if c.redisToken != "" {
		err = s.redis.Complete(redisCtx, c.key, c.redisToken, val, ttl)
		if err == nil {
			s.health.ok(c.ctx)
			return
		}
	}
	if s.filler == nil {
		if c.redisToken == "" {
			return
		}
	} else if c.redisToken == "" || errors.Is(err, idem.ErrLeaseLost) {
		// No claim here, or Redis lost it (flush, eviction, another
		// instance's claim after that): SQL decided, so the result replaces
		// whatever Redis holds.
		err = s.filler.Fill(redisCtx, idem.Record{Key: c.key, Fingerprint: c.fp(), State: idem.StateCompleted, Result: val}, ttl)
	}
	switch {
	case err == nil:
		s.health.ok(c.ctx)
	case errors.Is(err, idem.ErrTooLarge), errors.Is(err, idem.ErrLeaseLost):
		c.observe(idem.EventTierError, idem.TierRedis, 0, err)
	default:
		s.redisFailed(c.ctx, c.key, err)
	}
}

// backfill puts a completed record that SQL returned, read by a call sent
// at sent, into Redis for what it has left to live.
func (c *call) backfill(rec idem.Record, sent time.Time) {
	c.publishLater(rec.Result, lives(rec, sent))
}

// runFn runs fn, turning a panic into a *PanicError.
func runFn(ctx context.Context, fn Func) (val []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			val, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
