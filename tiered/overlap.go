package tiered

import (
	"errors"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/lockwait"
)

// With both tiers, a new key used to pay a Redis round trip before its SQL
// claim and another after its SQL completion, on the caller's time: the
// Redis tier, which exists to make duplicates cheap, cost every first
// execution two round trips. Two things take them off the critical path:
//
//   - While most keys need SQL (new keys, and keys Redis reports in
//     progress: SQL decides both), the Redis claim is sent on a goroutine
//     of its own while the call sends its SQL claim, and the call goes on
//     once both have answered (see executeOverlapped). SQL decides as
//     before; Redis only supplies its claim, whose completion wakes waiters
//     on other instances. When Redis answers on its own (a completed record:
//     a replay or a mismatch), that answer stands as it always did, and a
//     claim SQL granted meanwhile is released. The SQL claim goes out on the
//     caller's goroutine: it is the one the call waits for, and a goroutine
//     just started may wait for a processor to run on.
//   - The result SQL accepted reaches Redis on a goroutine of its own (see
//     publishLater): the caller is answered once SQL committed it.
//
// While most keys are duplicates Redis answers alone, the claims stay in
// order (Redis, then SQL only when needed), so that a duplicate does not
// cost the database a statement for nothing, nor wait for one. The Store
// learns which case holds from Redis's answers (Store.guess): a guess up by
// one for an answer that left the decision to SQL (a claim won, a key in
// progress) and down by one for one that decided (a completed record),
// which overlaps the claims while more recent calls needed SQL than not.

// tierAnswer is the answer of one Reserve sent at sent.
type tierAnswer struct {
	rec     idem.Record
	claimed bool
	err     error
	sent    time.Time
}

// reserveRedis sends one Redis Reserve for the call, at now.
func (c *call) reserveRedis(now time.Time) (a tierAnswer) {
	s := c.s
	a.sent = now
	ctx, cancel := c.bounded(s.redisBounds, boundRedisClaim, now)
	a.rec, a.claimed, a.err = s.redis.Reserve(ctx, c.key, c.fp(), s.cfg.lease, s.cfg.retention)
	cancel()
	c.tierCall(idem.TierRedis, now, a.err)
	return a
}

// reserveSQL sends one SQL Reserve for the call, now: a reading of the
// clock taken just before (the lease is counted from it).
func (c *call) reserveSQL(now time.Time) (a tierAnswer) {
	s := c.s
	a.sent = now
	ctx, cancel := c.bounded(s.sqlBounds, boundSQLClaim, a.sent)
	// A claim waits for a lock on the key (an atomic execution's open
	// transaction holds it) no longer than the wait (see askSQL).
	a.rec, a.claimed, a.err = s.sql.Reserve(lockwait.With(ctx, c.deadline()), c.key, c.fp(), s.cfg.lease, s.cfg.retention)
	cancel()
	c.tierCall(idem.TierSQL, a.sent, a.err)
	return a
}

// executeOverlapped is execute with both claims out at once.
func (c *call) executeOverlapped() outcome {
	s := c.s
	var redis chan tierAnswer
	if use, _ := s.health.allow(c.start); use {
		redis = make(chan tierAnswer, 1)
		if s.track() {
			go func() {
				defer s.wg.Done()
				redis <- c.reserveRedis(c.start)
			}()
		} else {
			redis <- c.reserveRedis(c.start) // closing: no goroutines; one after the other
		}
	}
	sql := c.reserveSQL(c.start) // sent as the execution begins
	if redis != nil {
		a := <-redis
		if o, done := c.askRedis(&a); done {
			c.dropSQL(sql)
			return o
		}
	}
	if o, done := c.askSQL(&sql); done {
		return o
	}
	return c.work(idem.TierSQL)
}

// dropSQL gives up a claim SQL granted to a call that Redis answered on its
// own (Redis holds a result SQL no longer has), so that the key is not held
// by nobody until the lease lapses.
func (c *call) dropSQL(a tierAnswer) {
	if a.err != nil || !a.claimed {
		return
	}
	s := c.s
	ctx, cancel := s.sqlBounds.Context(c.ctx, time.Now())
	defer cancel()
	if err := s.sql.Release(ctx, c.key, a.rec.Token); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		c.observe(idem.EventTierError, idem.TierSQL, 0, err)
	}
}
