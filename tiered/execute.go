package tiered

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemkit/idem"
)

// execute decides who runs fn for key and runs it if this process won. It is
// the one function handed to singleflight, so it never panics.
func (s *Store) execute(ctx context.Context, key idem.Key, fp string, fn Func) outcome {
	start := time.Now()
	deadline := start.Add(s.cfg.wait)

	rtok, rsent, o, done := s.redisPhase(ctx, key, fp, fn, start, deadline)
	if done {
		return o
	}
	if s.sql == nil {
		return s.run(ctx, key, fp, fn, "", rtok, idem.TierRedis, rsent)
	}
	stok, ssent, o, done := s.sqlPhase(ctx, key, fp, fn, rtok, rsent, start, deadline)
	if done {
		return o
	}
	return s.run(ctx, key, fp, fn, stok, rtok, idem.TierSQL, ssent)
}

// redisPhase asks Redis first. It returns this process's Redis claim (or ""
// when Redis was skipped) and when the claim was sent, or a finished outcome: a replay, a mismatch, an
// in-flight answer, or — in Redis-only mode — the outcome of deciding
// without Redis.
func (s *Store) redisPhase(ctx context.Context, key idem.Key, fp string, fn Func, start, deadline time.Time) (rtok string, sent time.Time, o outcome, done bool) {
	if s.redis == nil {
		return "", sent, outcome{}, false
	}
	now := start // one clock reading per attempt: they are not free
	waited := false
	for {
		use, _ := s.health.allow(now)
		if !use {
			if s.sql == nil {
				return "", sent, s.undecided(ctx, key, fp, fn, fmt.Errorf("%w: redis is switched off after repeated failures", idem.ErrUnavailable)), true
			}
			return "", sent, outcome{}, false
		}
		sent = now
		rctx, cancel := s.rbound.call(ctx, now)
		rec, claimed, err := s.redis.Reserve(rctx, key, fp, s.cfg.lease, s.cfg.retention)
		cancel()
		if err != nil {
			s.redisFailed(ctx, key, err)
			if s.sql == nil {
				return "", sent, s.undecided(ctx, key, fp, fn, err), true
			}
			return "", sent, outcome{}, false // SQL decides alone
		}
		s.health.ok(ctx)
		if claimed {
			return rec.Token, sent, outcome{}, false
		}
		if s.sql != nil && !rec.Completed() {
			// Redis says in progress. With SQL configured that is not the
			// last word: the claim may be an orphan (applied, but its reply
			// lost, so its owner never knew and never released it) that
			// outlives a result SQL holds or a release SQL saw. SQL decides,
			// and the wait for the owner uses Redis's completion signal.
			return "", sent, outcome{}, false
		}
		if rec.Fingerprint != fp {
			s.observe(ctx, idem.EventMismatch, idem.TierRedis, key, 0, nil)
			return "", sent, outcome{err: idem.ErrMismatch}, true
		}
		if rec.Completed() {
			return "", sent, s.replay(ctx, key, fp, rec, idem.TierRedis, waited, start), true
		}
		// In progress on another instance: wait for its completion signal.
		if !time.Now().Before(deadline) {
			s.observe(ctx, idem.EventInFlight, idem.TierRedis, key, time.Since(start), nil)
			return "", sent, outcome{err: idem.ErrInFlight}, true
		}
		waited = true
		rec, err = s.waitRedis(ctx, key, deadline)
		switch {
		case err == nil:
			if rec.Fingerprint != fp {
				s.observe(ctx, idem.EventMismatch, idem.TierRedis, key, 0, nil)
				return "", sent, outcome{err: idem.ErrMismatch}, true
			}
			return "", sent, s.replay(ctx, key, fp, rec, idem.TierRedis, true, start), true
		case errors.Is(err, idem.ErrNotFound), errors.Is(err, idem.ErrInFlight):
			// Released (the owner failed) or the wait ran out: reserve again;
			// the deadline check above ends the loop.
			now = time.Now()
			continue
		case s.stopped(ctx):
			return "", sent, outcome{err: ErrClosed}, true
		default:
			s.redisFailed(ctx, key, err)
			if s.sql == nil {
				return "", sent, s.undecided(ctx, key, fp, fn, err), true
			}
			return "", sent, outcome{}, false
		}
	}
}

// waitRedis waits until the in-progress record for key finishes, through the
// Redis completion signal when the layer has one, else by polling Reserve.
// It returns the completed record, idem.ErrNotFound when the record is gone,
// or idem.ErrInFlight when deadline passed first.
func (s *Store) waitRedis(ctx context.Context, key idem.Key, deadline time.Time) (idem.Record, error) {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if s.waiter != nil {
		rec, err := s.waiter.Wait(wctx, key)
		if err != nil && wctx.Err() != nil && !s.stopped(ctx) {
			return idem.Record{}, idem.ErrInFlight
		}
		if err == nil && !rec.Completed() {
			return idem.Record{}, idem.ErrInFlight
		}
		return rec, err
	}
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		if !s.sleep(wctx, pause) {
			if s.stopped(ctx) {
				return idem.Record{}, ErrClosed
			}
			return idem.Record{}, idem.ErrInFlight
		}
		rctx, c := s.rbound.call(ctx, time.Now())
		rec, err := s.redis.Get(rctx, key)
		c()
		if err != nil || rec.Completed() {
			return rec, err
		}
	}
}

// sqlPhase asks SQL, which decides. It returns this process's SQL claim, or
// a finished outcome. rtok is this process's Redis claim, released here on
// every path that does not run fn.
func (s *Store) sqlPhase(ctx context.Context, key idem.Key, fp string, fn Func, rtok string, rsent, start, deadline time.Time) (stok string, sent time.Time, o outcome, done bool) {
	waited := false
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		sent = time.Now()
		sctx, cancel := s.sbound.call(ctx, sent)
		rec, claimed, err := s.sql.Reserve(sctx, key, fp, s.cfg.lease, s.cfg.retention)
		cancel()
		if err != nil {
			if s.stopped(ctx) {
				s.releaseRedis(key, rtok)
				return "", sent, outcome{err: ErrClosed}, true
			}
			s.observe(ctx, idem.EventTierError, idem.TierSQL, key, 0, err)
			if s.cfg.failOpen {
				// The Redis claim, if any, is the only guard left.
				return "", sent, s.run(ctx, key, fp, fn, "", rtok, idem.TierNone, rsent), true
			}
			s.releaseRedis(key, rtok)
			if !errors.Is(err, idem.ErrUnavailable) {
				err = fmt.Errorf("%w: sql: %w", idem.ErrUnavailable, err)
			}
			return "", sent, outcome{err: err}, true
		}
		if claimed {
			return rec.Token, sent, outcome{}, false
		}
		if rec.Fingerprint != fp {
			s.releaseRedis(key, rtok)
			s.observe(ctx, idem.EventMismatch, idem.TierSQL, key, 0, nil)
			return "", sent, outcome{err: idem.ErrMismatch}, true
		}
		if rec.Completed() {
			s.publish(ctx, key, rec.Fingerprint, rec.Result, rtok)
			return "", sent, s.replay(ctx, key, fp, rec, idem.TierSQL, waited, start), true
		}
		// In progress: another owner works (or its lease has not lapsed by
		// the database clock). Wait for its completion signal or poll, then
		// Reserve again — which also takes over an expired lease — until the
		// deadline.
		if !time.Now().Add(pause).Before(deadline) {
			s.releaseRedis(key, rtok)
			s.observe(ctx, idem.EventInFlight, idem.TierSQL, key, time.Since(start), nil)
			return "", sent, outcome{err: idem.ErrInFlight}, true
		}
		waited = true
		if rec, ok := s.awaitSignal(ctx, key, rtok, pause, deadline); ok {
			if rec.Fingerprint == fp {
				s.releaseRedis(key, rtok)
				return "", sent, s.replay(ctx, key, fp, rec, idem.TierRedis, true, start), true
			}
			continue // not ours to replay: ask SQL again
		}
		if s.stopped(ctx) {
			s.releaseRedis(key, rtok)
			return "", sent, outcome{err: ErrClosed}, true
		}
	}
}

// maxSignalWait bounds one wait for Redis's completion signal before SQL is
// asked again, for owners whose result never reaches Redis.
const maxSignalWait = time.Second

// awaitSignal waits for the in-progress owner of key to finish while SQL
// says it is still working. Through Redis's completion signal when Redis has
// one, is up, and this process does not itself hold the Redis claim (then
// the owner's completion reaches Redis only by back-fill): it returns a
// completed record from Redis with ok true, or ok false when the wait ended
// otherwise. Without a signal it sleeps pause. Either way it returns by
// deadline.
func (s *Store) awaitSignal(ctx context.Context, key idem.Key, rtok string, pause time.Duration, deadline time.Time) (idem.Record, bool) {
	if s.waiter != nil && rtok == "" && !s.health.isOff() {
		until := time.Now().Add(maxSignalWait)
		if deadline.Before(until) {
			until = deadline
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		began := time.Now()
		rec, err := s.waiter.Wait(wctx, key)
		cancel()
		switch {
		case err == nil && rec.Completed():
			return rec, true
		case err != nil && wctx.Err() == nil && !s.stopped(ctx) && !errors.Is(err, idem.ErrNotFound):
			s.redisFailed(ctx, key, err)
		}
		if time.Since(began) >= pause {
			return idem.Record{}, false // waited long enough: ask SQL again
		}
	}
	s.sleep(ctx, pause)
	return idem.Record{}, false
}

// undecided handles a deciding tier that cannot answer: fail closed, or run
// without a decision under WithFailOpen.
func (s *Store) undecided(ctx context.Context, key idem.Key, fp string, fn Func, cause error) outcome {
	if s.cfg.failOpen {
		return s.run(ctx, key, fp, fn, "", "", idem.TierNone, time.Now())
	}
	if !errors.Is(cause, idem.ErrUnavailable) {
		cause = fmt.Errorf("%w: %w", idem.ErrUnavailable, cause)
	}
	return outcome{err: cause}
}

// replay returns a completed record's result and caches it.
func (s *Store) replay(ctx context.Context, key idem.Key, fp string, rec idem.Record, tier idem.Tier, waited bool, start time.Time) outcome {
	if s.cache != nil || waited {
		now := time.Now()
		s.cache.put(key, fp, rec.Result, time.Time{}, now)
		if waited {
			s.observe(ctx, idem.EventWaited, tier, key, now.Sub(start), nil)
		}
	}
	s.observe(ctx, idem.EventReplay, tier, key, 0, nil)
	return replayed(rec.Result, tier)
}

// replayed is the outcome of replaying a stored value: the value, or the
// error a tombstone stands for.
func replayed(val []byte, tier idem.Tier) outcome {
	if isTombstone(val) {
		return outcome{result: Result{Replayed: true, Tier: tier}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: val, Replayed: true, Tier: tier}}
}

// run executes fn as the owner of the claims stok (SQL) and rtok (Redis),
// renewing them while it runs, then completes or releases them.
func (s *Store) run(ctx context.Context, key idem.Key, fp string, fn Func, stok, rtok string, tier idem.Tier, sent time.Time) outcome {
	// The lease runs from when the store executed the claim, which is after
	// it was sent: count from the send, less a margin for clock rate and
	// scheduling.
	expiry := sent.Add(s.cfg.lease - s.leaseMargin())
	if (stok != "" || (s.sql == nil && rtok != "")) && time.Until(expiry) < s.cfg.lease/3 {
		// The claim's answer came late: too little of the lease is left to
		// start the work safely. Renew first, or give the claim up.
		renewSent := time.Now()
		decided, lost := s.renewOnce(ctx, key, stok, &rtok, expiry)
		if lost || !decided {
			s.release(key, stok, rtok)
			err := fmt.Errorf("%w: the claim's answer came too late to start the work", idem.ErrLeaseLost)
			s.observe(ctx, idem.EventLeaseLost, tier, key, 0, err)
			return outcome{result: Result{Tier: tier}, err: err}
		}
		expiry = renewSent.Add(s.cfg.lease - s.leaseMargin())
	}
	// The work ends with the Store: Close cancels it (cause ErrClosed).
	workCtx, cancel := context.WithCancelCause(&underStore{Context: ctx, base: s.base})
	defer cancel(nil)
	renewal := s.renew(workCtx, cancel, key, stok, rtok, expiry)
	start := time.Now()
	val, err := call(workCtx, fn)
	renewal.stop()
	took := time.Since(start)
	if err != nil {
		if cause := context.Cause(workCtx); errors.Is(cause, idem.ErrLeaseLost) && errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", idem.ErrLeaseLost, err)
		}
		s.release(key, stok, rtok)
		s.observe(ctx, idem.EventReleased, tier, key, took, err)
		return outcome{result: Result{Value: val, Tier: tier}, err: err}
	}
	// fn succeeded. Even if renewal gave up, complete: when no one took over,
	// the token still works and the result is kept; when someone did, the
	// layer says ErrLeaseLost and the winner's result stays.
	stored := val
	if stok != "" {
		err := s.completeSQL(ctx, key, stok, stored)
		if errors.Is(err, idem.ErrTooLarge) {
			// The work ran once; its result cannot be kept. Finalise the key
			// as a tombstone so that retries never run it again.
			stored = tombstone
			err = s.completeSQL(ctx, key, stok, stored)
		}
		switch {
		case err == nil:
		case errors.Is(err, idem.ErrLeaseLost):
			s.releaseRedis(key, rtok)
			s.observe(ctx, idem.EventLeaseLost, idem.TierSQL, key, took, err)
			return outcome{result: Result{Value: val, Tier: tier}, err: err}
		default:
			// The work ran and the token may still be good: a lapsed lease
			// stays ours until someone takes it over. Keep completing in the
			// background rather than forget the result, and answer now.
			s.observe(ctx, idem.EventTierError, idem.TierSQL, key, took, err)
			s.completeLater(key, fp, stok, rtok, stored)
			return outcome{result: Result{Value: val, Tier: tier}}
		}
	}
	if s.redis != nil {
		if s.sql == nil && rtok != "" {
			// Redis decides: its completion is the decision.
			rctx, c := s.rbound.call(ctx, time.Now())
			err := s.redis.Complete(rctx, key, rtok, stored, s.cfg.retention)
			if errors.Is(err, idem.ErrTooLarge) {
				stored = tombstone
				err = s.redis.Complete(rctx, key, rtok, stored, s.cfg.retention)
			}
			c()
			if err != nil {
				if errors.Is(err, idem.ErrLeaseLost) {
					s.observe(ctx, idem.EventLeaseLost, idem.TierRedis, key, took, err)
				} else {
					s.redisFailed(ctx, key, err)
					err = fmt.Errorf("%w: completing in redis: %w", idem.ErrUnavailable, err)
				}
				return outcome{result: Result{Value: val, Tier: tier}, err: err}
			}
		} else {
			s.publish(ctx, key, fp, stored, rtok)
		}
	}
	s.cache.put(key, fp, stored, time.Time{}, time.Now())
	s.observe(ctx, idem.EventNew, tier, key, took, nil)
	if isTombstone(stored) {
		return outcome{result: Result{Value: val, Tier: tier}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: val, Tier: tier}}
}

// underStore is an execution's values (its leading caller's, detached)
// under the Store's cancellation, the parent of the work's context. Values
// are looked up in the Store's context first: it holds none of its own, so
// no caller's value changes, and context.WithCancel then finds the Store's
// context as the nearest cancellable parent and registers the work with it
// directly, rather than through a watcher per execution.
type underStore struct {
	context.Context
	base context.Context
}

func (c *underStore) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *underStore) Done() <-chan struct{}       { return c.base.Done() }
func (c *underStore) Err() error                  { return c.base.Err() }
func (c *underStore) Value(key any) any {
	if v := c.base.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// completeLater goes on completing the SQL claim stok in the background,
// after the foreground attempts failed, until SQL accepts it, refuses the
// token (another owner took over: its result stands), or the Store closes.
// Then it publishes the result to Redis and the local cache.
func (s *Store) completeLater(key idem.Key, fp, stok, rtok string, val []byte) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx := s.base
		began := time.Now()
		for pause := s.cfg.pollMax; ; {
			if !s.sleep(ctx, pause) {
				return
			}
			if time.Since(began) > s.cfg.lease {
				// Past the lease another owner may take over at any moment;
				// until then each attempt counts, so retry at the short pause.
				pause = min(2*pause, maxCompleteRetry)
			}
			sctx, cancel := s.sbound.call(ctx, time.Now())
			err := s.sql.Complete(sctx, key, stok, val, s.cfg.retention)
			cancel()
			switch {
			case err == nil:
				s.publish(ctx, key, fp, val, rtok)
				s.cache.put(key, fp, val, time.Time{}, time.Now())
				return
			case errors.Is(err, idem.ErrLeaseLost):
				s.releaseRedis(key, rtok)
				s.observe(ctx, idem.EventLeaseLost, idem.TierSQL, key, 0, err)
				return
			}
		}
	}()
}

// maxCompleteRetry caps the pause between background completion attempts.
const maxCompleteRetry = 5 * time.Second

// call runs fn, turning a panic into a *PanicError.
func call(ctx context.Context, fn Func) (val []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			val, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

// completeSQL completes the SQL claim, retrying transient failures while the
// lease lasts: the work has run, and giving up would let a retry run it
// again once the lease lapses.
func (s *Store) completeSQL(ctx context.Context, key idem.Key, stok string, val []byte) error {
	giveUp := time.Now().Add(s.cfg.lease / 2)
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		sctx, cancel := s.sbound.call(ctx, time.Now())
		err := s.sql.Complete(sctx, key, stok, val, s.cfg.retention)
		cancel()
		if err == nil || errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrTooLarge) || s.stopped(ctx) {
			return err
		}
		if !time.Now().Add(pause).Before(giveUp) || !s.sleep(ctx, pause) {
			if !errors.Is(err, idem.ErrUnavailable) {
				err = fmt.Errorf("%w: completing in sql: %w", idem.ErrUnavailable, err)
			}
			return err
		}
	}
}

// publish puts a completed result into Redis so duplicates on other
// instances replay it (and their waiters wake): through this process's claim
// when it has one, else by back-filling. Best effort: SQL holds the result.
func (s *Store) publish(ctx context.Context, key idem.Key, fp string, val []byte, rtok string) {
	if s.redis == nil {
		return
	}
	if use, _ := s.health.allow(time.Now()); !use {
		return
	}
	rctx, cancel := s.rbound.call(ctx, time.Now())
	defer cancel()
	var err error
	if rtok != "" {
		err = s.redis.Complete(rctx, key, rtok, val, s.cfg.retention)
		if err == nil {
			s.health.ok(ctx)
			return
		}
	}
	if s.filler == nil {
		if rtok == "" {
			return
		}
	} else if rtok == "" || errors.Is(err, idem.ErrLeaseLost) {
		// No claim here, or Redis lost it (flush, eviction, another
		// instance's claim after that): SQL decided, so the result replaces
		// whatever Redis holds.
		err = s.filler.Fill(rctx, idem.Record{Key: key, Fingerprint: fp, State: idem.StateCompleted, Result: val}, s.cfg.retention)
	}
	switch {
	case err == nil:
		s.health.ok(ctx)
	case errors.Is(err, idem.ErrTooLarge), errors.Is(err, idem.ErrLeaseLost):
		s.observe(ctx, idem.EventTierError, idem.TierRedis, key, 0, err)
	default:
		s.redisFailed(ctx, key, err)
	}
}

// release forgets both claims after failed work, so a retry runs again. It
// runs on a context of its own: the Store's may be closing.
func (s *Store) release(key idem.Key, stok, rtok string) {
	if stok != "" {
		ctx, cancel := s.sbound.call(context.Background(), time.Now())
		if err := s.sql.Release(ctx, key, stok); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
			s.observe(ctx, idem.EventTierError, idem.TierSQL, key, 0, err)
		}
		cancel()
	}
	s.releaseRedis(key, rtok)
}

func (s *Store) releaseRedis(key idem.Key, rtok string) {
	if rtok == "" {
		return
	}
	ctx, cancel := s.rbound.call(context.Background(), time.Now())
	defer cancel()
	if err := s.redis.Release(ctx, key, rtok); err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		s.redisFailed(ctx, key, err)
	}
}

// redisFailed records a Redis failure: an event, and a strike towards
// switching Redis off. A caller's own cancellation is no strike.
func (s *Store) redisFailed(ctx context.Context, key idem.Key, err error) {
	if errors.Is(err, context.Canceled) && s.stopped(ctx) {
		return
	}
	s.observe(ctx, idem.EventTierError, idem.TierRedis, key, 0, err)
	s.health.fail(ctx, err, time.Now())
}

// stopped reports whether the call should give up: ctx ended or the Store
// closed. The phases before the work run on the caller's values without any
// cancellation (see Do), so Close reaches them through this check.
func (s *Store) stopped(ctx context.Context) bool { return ctx.Err() != nil || s.base.Err() != nil }

// sleep waits d, or until ctx ends or the Store closes; it reports whether
// d passed.
func (s *Store) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.base.Done():
		return false
	}
}
