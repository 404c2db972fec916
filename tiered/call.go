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
	part        *flights // the table of calls in flight that holds it
	// flight is the call's entry in part: its name there, the channel
	// closed when out is set, and the cancel of its work, through which
	// Close cancels the work.
	flight flight.Call[flightKey, *call]

	start time.Time // when the execution began deciding (see deadline)

	redisToken    string    // this process's claim in Redis, or ""
	redisSent     time.Time // when that claim was sent
	redisTookOver bool      // that claim took over an earlier owner's
	redisDown     bool      // Redis failed this call: its best-effort writes skip it
	sqlToken      string    // this process's claim in SQL, or ""
	sqlSent       time.Time // when that claim was sent
	sqlTookOver   bool      // that claim took over an earlier owner's

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
// by b (see deadline.Bound.Context). The first call of each purpose gets the call's own
// storage for it, so that an execution allocates no context for its claims
// and its completion; later ones (retries, polls) allocate. The calls of one
// purpose are never made concurrently: each kind is made by one goroutine
// at a time, the next one only after the last returned.
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
	defer c.part.leave(c)
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

// askRedis asks Redis first. first is the answer of a Reserve sent ahead
// (health allowed it), or nil. It leaves this process's Redis claim in
// c.redisToken (or "" when Redis was skipped), or returns a finished
// outcome: a replay, a mismatch, an in-flight answer, or — in Redis-only
// mode — the outcome of deciding without Redis.
func (c *call) askRedis(first *tierAnswer) (o outcome, done bool) {
	s := c.s
	if s.redis == nil {
		return outcome{}, false
	}
	now := c.start // one clock reading per attempt: they are not free
	waited := false
	for {
		var a tierAnswer
		if first != nil {
			a, first = *first, nil
		} else {
			if use, _ := s.health.allow(now); !use {
				if s.sql == nil {
					return c.undecided(fmt.Errorf("%w: redis is switched off after repeated failures", idem.ErrUnavailable)), true
				}
				return outcome{}, false
			}
			a = c.reserveRedis(now)
		}
		c.redisSent = a.sent
		rec, claimed, err := a.rec, a.claimed, a.err
		if err != nil {
			s.redisFailed(c.ctx, c.key, err)
			if s.sql == nil {
				return c.undecided(err), true
			}
			c.redisDown = true
			return outcome{}, false // SQL decides alone
		}
		s.health.ok(c.ctx)
		if s.sql != nil {
			s.guess.Learn(claimed || !rec.Completed())
		}
		if claimed {
			c.redisToken, c.redisTookOver = rec.Token, rec.TookOver
			c.observe(idem.EventClaimed, idem.TierRedis, 0, nil)
			return outcome{}, false
		}
		if s.sql != nil && !rec.Completed() {
			// Redis says in progress. With SQL configured that is not the
			// last word: the claim may be an orphan (applied, but its reply
			// lost, so its owner never knew and never released it) that
			// outlives a result SQL holds or a release SQL saw. SQL decides,
			// and the wait for the owner uses Redis's completion signal.
			return outcome{}, false
		}
		if rec.Fingerprint != c.fp() {
			c.observe(idem.EventMismatch, idem.TierRedis, 0, nil)
			return outcome{result: Result{Tier: idem.TierRedis}, err: idem.ErrMismatch}, true
		}
		if rec.Completed() {
			return c.replay(rec, idem.TierRedis, now, waited), true
		}
		// In progress on another instance: wait for its completion signal.
		if !time.Now().Before(c.deadline()) {
			c.observe(idem.EventInFlight, idem.TierRedis, time.Since(c.start), nil)
			return outcome{result: Result{Tier: idem.TierRedis}, err: idem.ErrInFlight}, true
		}
		waited = true
		asked := time.Now()
		rec, err = c.waitRedis()
		switch {
		case err == nil:
			if rec.Fingerprint != c.fp() {
				c.observe(idem.EventMismatch, idem.TierRedis, 0, nil)
				return outcome{result: Result{Tier: idem.TierRedis}, err: idem.ErrMismatch}, true
			}
			return c.replay(rec, idem.TierRedis, asked, true), true
		case errors.Is(err, idem.ErrNotFound), errors.Is(err, idem.ErrInFlight):
			// Released (the owner failed) or the wait ran out: reserve again;
			// the deadline check above ends the loop.
			now = time.Now()
			continue
		case s.stopped(c.ctx):
			return outcome{err: idem.ErrClosed}, true
		default:
			s.redisFailed(c.ctx, c.key, err)
			if s.sql == nil {
				return c.undecided(err), true
			}
			return outcome{}, false
		}
	}
}

// waitRedis waits until the in-progress record for the key finishes, through
// the Redis completion signal when the layer has one, else by polling Get.
// It returns the completed record, idem.ErrNotFound when the record is
// gone, or idem.ErrInFlight when the deadline passed first.
func (c *call) waitRedis() (idem.Record, error) {
	s := c.s
	waitCtx, cancel := context.WithDeadline(c.ctx, c.deadline())
	defer cancel()
	if s.waiter != nil {
		rec, err := s.waiter.Wait(waitCtx, c.key)
		if err != nil && waitCtx.Err() != nil && !s.stopped(c.ctx) {
			return idem.Record{}, idem.ErrInFlight
		}
		if err == nil && !rec.Completed() {
			return idem.Record{}, idem.ErrInFlight
		}
		return rec, err
	}
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		if !s.sleep(waitCtx, pause) {
			if s.stopped(c.ctx) {
				return idem.Record{}, idem.ErrClosed
			}
			return idem.Record{}, idem.ErrInFlight
		}
		redisCtx, cancel := s.redisBounds.Context(c.ctx, time.Now())
		rec, err := s.redis.Get(redisCtx, c.key)
		cancel()
		if err != nil || rec.Completed() {
			return rec, err
		}
	}
}

// askSQL asks SQL, which decides. first is the answer of a Reserve sent
// ahead, or nil. It leaves this process's SQL claim in c.sqlToken, or
// returns a finished outcome. The Redis claim, if any, is released on every
// path that does not run fn.
func (c *call) askSQL(first *tierAnswer) (o outcome, done bool) {
	s := c.s
	waited := false
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		var a tierAnswer
		switch {
		case first != nil:
			a, first = *first, nil
		case s.redis == nil && !waited:
			// The first claim, sent as the execution begins: its reading of
			// the clock serves.
			a = c.reserveSQL(c.start)
		default:
			a = c.reserveSQL(time.Now())
		}
		rec, claimed, err, sent := a.rec, a.claimed, a.err, a.sent
		if err != nil {
			if s.stopped(c.ctx) {
				c.releaseRedis()
				return outcome{err: idem.ErrClosed}, true
			}
			c.observe(idem.EventTierError, idem.TierSQL, 0, err)
			if errors.Is(err, idem.ErrConfig) {
				// A setup mistake is not an outage: never fail open, never
				// "retry later"; say it loudly.
				s.misconfigured(c.ctx, idem.TierSQL, err)
				c.releaseRedis()
				return outcome{err: err}, true
			}
			if s.cfg.failOpen {
				// The Redis claim, if any, is the only guard left.
				return c.work(idem.TierNone), true
			}
			c.releaseRedis()
			if !errors.Is(err, idem.ErrUnavailable) {
				err = fmt.Errorf("%w: sql: %w", idem.ErrUnavailable, err)
			}
			return outcome{err: err}, true
		}
		if claimed {
			c.sqlToken, c.sqlSent, c.sqlTookOver = rec.Token, sent, rec.TookOver
			c.observe(idem.EventClaimed, idem.TierSQL, 0, nil)
			return outcome{}, false
		}
		if rec.Fingerprint != c.fp() {
			c.releaseRedis()
			c.observe(idem.EventMismatch, idem.TierSQL, 0, nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrMismatch}, true
		}
		if rec.Completed() {
			c.backfill(rec, sent)
			return c.replay(rec, idem.TierSQL, sent, waited), true
		}
		// In progress: another owner works (or its lease, or the grace
		// after it, has not lapsed by the database clock). Wait for its
		// completion signal or poll, then Reserve again — which also takes
		// over a lapsed lease — until the deadline.
		if !time.Now().Add(pause).Before(c.deadline()) {
			c.releaseRedis()
			c.observe(idem.EventInFlight, idem.TierSQL, time.Since(c.start), nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrInFlight}, true
		}
		waited = true
		asked := time.Now()
		if rec, ok := c.awaitSignal(pause); ok {
			if rec.Fingerprint == c.fp() {
				c.releaseRedis()
				return c.replay(rec, idem.TierRedis, asked, true), true
			}
			continue // not ours to replay: ask SQL again
		}
		if s.stopped(c.ctx) {
			c.releaseRedis()
			return outcome{err: idem.ErrClosed}, true
		}
	}
}

// maxSignalWait bounds one wait for Redis's completion signal before SQL is
// asked again, for owners whose result never reaches Redis.
const maxSignalWait = time.Second

// awaitSignal waits for the in-progress owner of the key to finish while
// SQL says it is still working. Through Redis's completion signal when Redis
// has one, is up, and this process does not itself hold the Redis claim
// (then the owner's completion reaches Redis only by back-fill): it returns
// a completed record from Redis with ok true, or ok false when the wait
// ended otherwise. Without a signal it sleeps pause. Either way it returns
// by the deadline.
func (c *call) awaitSignal(pause time.Duration) (idem.Record, bool) {
	s := c.s
	if s.waiter != nil && c.redisToken == "" && !s.health.isOff() {
		began := time.Now()
		until := began.Add(maxSignalWait)
		if c.deadline().Before(until) {
			until = c.deadline()
		}
		waitCtx, cancel := context.WithDeadline(c.ctx, until)
		rec, err := s.waiter.Wait(waitCtx, c.key)
		cancel()
		switch {
		case err == nil && rec.Completed():
			return rec, true
		case err != nil && waitCtx.Err() == nil && !s.stopped(c.ctx) && !errors.Is(err, idem.ErrNotFound):
			s.redisFailed(c.ctx, c.key, err)
		}
		if time.Since(began) >= pause {
			return idem.Record{}, false // waited long enough: ask SQL again
		}
	}
	s.sleep(c.ctx, pause)
	return idem.Record{}, false
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

// replay returns a completed record's result, read from tier by a call sent
// at sent, and caches it for no longer than the record lives.
func (c *call) replay(rec idem.Record, tier idem.Tier, sent time.Time, waited bool) outcome {
	if c.s.cache != nil || waited {
		now := time.Now()
		c.s.cache.put(c.key, c.fp(), rec.Result, lives(rec, sent), now)
		if waited {
			c.observe(idem.EventWaited, tier, now.Sub(c.start), nil)
		}
	}
	c.observe(idem.EventReplay, tier, 0, nil)
	o := replayed(rec.Result, tier)
	o.result.Waited = waited
	return o
}

// lives returns until when, by this process's clock, rec is sure to live:
// the send time of the call that read it plus what it had left then. The
// zero time when the layer could not tell.
func lives(rec idem.Record, sent time.Time) time.Time {
	if rec.ExpiresIn <= 0 {
		return time.Time{}
	}
	return sent.Add(rec.ExpiresIn)
}

// replayed is the outcome of replaying a stored value: the value, or
// ErrNotReplayable for the marker of a result too large to keep.
func replayed(val []byte, tier idem.Tier) outcome {
	if isTooLargeMarker(val) {
		return outcome{result: Result{Replayed: true, Tier: tier}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: val, Replayed: true, Tier: tier}}
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
