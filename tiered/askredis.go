package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

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
