package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/deadline"
	"github.com/idemkit/idem/internal/flight"
)

// call is one execution of a key and fingerprint in this process: what the
// callers that share it asked for, the claims it holds in each tier, and
// its outcome. The leading caller's goroutine, or one started for it, runs
// it through its phases (askRedis, askSQL, work); everything but flight's
// own fields is touched by that goroutine alone until flight's Done is
// closed, and only read after.
type call struct {
	s           *Store
	ctx         context.Context // the leader's; its values are the work's, never its cancellation
	key         idem.Key
	fn          Func
	fingerprint string
	// flight is the call's entry in s.flights: its name there, the channel
	// closed when out is set, and the cancel of its work, through which
	// Close cancels the work.
	flight flight.Call[flightKey, *call]

	start time.Time // when the execution began deciding (see call.deadline)

	redisToken    string    // this process's claim in Redis, or ""
	redisSent     time.Time // when that claim was sent
	redisTookOver bool      // that claim took over an earlier owner's
	redisDown     bool      // Redis failed this call: its best-effort writes skip it
	sqlTookOver   bool      // the claim in SQL took over an earlier owner's
	sqlToken      string    // this process's claim in SQL, or ""
	sqlSent       time.Time // when that claim was sent

	out outcome

	// The owner's hold on its claims and their renewal: part of the call,
	// so that an execution costs one allocation for them all.
	h   hold
	ren renewal
	// bound holds the contexts of the first tier call of each purpose (see
	// bounded); each is written once, before its call, and never again.
	bound [boundPurposes]deadline.Ctx
}

// The purposes of the tier calls whose first context is part of the call:
// the ones every execution makes.
const (
	boundRedisClaim = iota
	boundSQLClaim
	boundCompletion
	boundPurposes
)

// bounded returns the context of a tier call for purpose made now, bounded
// by b (see deadline.Bound.Context). The first call of each purpose gets
// the call's own storage for it, so that an execution allocates no context
// for its claims and its completion; later ones (retries, polls) allocate.
// The calls of one purpose are never made concurrently: each kind is made
// by one goroutine at a time, the next one only after the last returned.
func (c *call) bounded(b *deadline.Bound, purpose int, now time.Time) (context.Context, context.CancelFunc) {
	var into *deadline.Ctx
	if c.bound[purpose].Context == nil {
		into = &c.bound[purpose]
	}
	return b.ContextIn(c.ctx, now, into)
}

// fp returns the call's fingerprint.
func (c *call) fp() string { return c.fingerprint }

// deadline returns when waiting for another owner ends: the Store's wait
// after the start.
func (c *call) deadline() time.Time { return c.start.Add(c.s.cfg.wait) }

// now reads the clock for the execution's own reckoning (how much of the
// lease is left, how long the work took, when its completion is sent): the
// start plus the monotonic time since, one reading of the clock where
// time.Now takes two. Such a time is only compared with, added to and
// subtracted from other readings of this process, which use their
// monotonic parts; its wall clock part is the start's, moved on as much.
func (c *call) now() time.Time { return c.start.Add(time.Since(c.start)) }

// lead runs the execution and hands its outcome to everyone waiting. It
// never panics: fn's panic is recovered in runFn. When fn calls
// runtime.Goexit, work sets the outcome (ErrGoexit) as this goroutine
// unwinds, the deferred leave hands it on, and the goroutine still exits.
func (c *call) lead() {
	c.ctx = detach(c.ctx)
	if c.s.obs != nil {
		// The layers report what only they see (a takeover, a grace) to the
		// Store's observer through the context of each call.
		c.ctx = idem.ContextWithObserver(c.ctx, c.s.obs)
	}
	defer c.s.flights.leave(c)
	c.out = c.execute()
}

// execute decides who runs fn for the key and runs it if this process won.
func (c *call) execute() outcome {
	s := c.s
	if c.start.IsZero() { // else Do's reading, taken just before
		c.start = time.Now()
	}
	if s.cfg.atomicLayer != nil {
		return c.executeAtomic() // see atomic.go
	}
	if s.sql != nil && s.redis != nil && s.guess.Likely() {
		return c.executeOverlapped() // see overlap.go
	}
	if o, done := c.askRedis(nil); done {
		return o
	}
	if s.sql == nil {
		return c.work(idem.TierRedis)
	}
	if o, done := c.askSQL(nil); done {
		return o
	}
	return c.work(idem.TierSQL)
}

// undecided handles a deciding tier that cannot answer: fail closed, or run
// without a decision under WithFailOpen.
func (c *call) undecided(cause error) outcome {
	if errors.Is(cause, idem.ErrConfig) {
		return outcome{err: cause} // not an outage: see askSQL
	}
	if c.s.cfg.failOpen {
		return c.work(idem.TierNone)
	}
	if !errors.Is(cause, idem.ErrUnavailable) {
		cause = fmt.Errorf("%w: %w", idem.ErrUnavailable, cause)
	}
	return outcome{err: cause}
}

// releaseRedis forgets this process's Redis claim, if any.
func (c *call) releaseRedis() {
	if c.redisToken == "" {
		return
	}
	s := c.s
	ctx, cancel := s.redisBounds.Context(context.Background(), time.Now())
	defer cancel()
	if err := s.redis.Release(ctx, c.key, c.redisToken); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		s.redisFailed(ctx, c.key, err)
	}
	c.redisToken = ""
}

// release forgets both claims after failed work, so a retry runs again. It
// runs on a context of its own: the Store's may be closing.
func (c *call) release() {
	s := c.s
	if c.sqlToken != "" {
		ctx, cancel := s.sqlBounds.Context(context.Background(), time.Now())
		if err := s.sql.Release(ctx, c.key, c.sqlToken); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
			s.observe(ctx, idem.EventTierError, idem.TierSQL, c.key, 0, err)
		}
		cancel()
	}
	c.releaseRedis()
}

func (c *call) observe(kind idem.EventKind, tier idem.Tier, d time.Duration, err error) {
	c.s.observe(c.ctx, kind, tier, c.key, d, err)
}

// tierCall reports a call to tier sent at sent that returned err, for
// per-tier latency. Without an observer it costs a comparison.
func (c *call) tierCall(tier idem.Tier, sent time.Time, err error) {
	if c.s.obs != nil {
		c.observe(idem.EventTierCall, tier, time.Since(sent), err)
	}
}
