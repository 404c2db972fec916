package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

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
		// ErrInFlight from the layer: an open transaction holds the key
		// (an atomic execution's claim, not yet committed): wait for it as
		// for an owner in progress.
		held := err != nil && errors.Is(err, idem.ErrInFlight)
		switch {
		case held:
		case err != nil:
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
		case claimed:
			c.sqlToken, c.sqlSent, c.sqlTookOver = rec.Token, sent, rec.TookOver
			c.observe(idem.EventClaimed, idem.TierSQL, 0, nil)
			return outcome{}, false
		case rec.Fingerprint != c.fp():
			c.releaseRedis()
			c.observe(idem.EventMismatch, idem.TierSQL, 0, nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrMismatch}, true
		case rec.Completed():
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
