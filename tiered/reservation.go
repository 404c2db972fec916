package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
)

// The reservation in fn's transaction. fn may complete its reservation in
// a database transaction of its own (sqllayer's CompleteReservation), so
// that idem's record commits with its business rows. The Store then does not
// complete the key: once fn returns, it reads what committed, and
//
//   - the record completed with the result fn's transaction wrote: fn's
//     transaction committed. The result goes on to Redis and the local
//     cache, and every caller gets it, as for a completion of the Store's;
//   - the record still in progress (or gone): the transaction did not commit.
//     The key is released, so that a retry runs again (ErrNotCommitted);
//   - another result or fingerprint: another owner took the key over; its
//     result stands (idem.ErrLeaseLost);
//   - the deciding tier unreachable: the Store holds the lease and reads
//     again in the background until it can tell, as for a completion still
//     pending (ErrPending). It never runs the work again and never releases
//     a record that committed.
//
// The lease is held throughout: while fn runs (a renewal refused because
// fn's own transaction completed the record ends the renewals quietly) and
// until the Store has read what committed.

// reserve puts the reservation of the call's deciding claim on ctx, for fn,
// and returns it with the Store's handle on it.
func (c *call) reserve(ctx context.Context, h *hold) (context.Context, *reservation.State) {
	layer, token := h.claim()
	tookOver := c.sqlTookOver
	if h.tier == idem.TierRedis {
		tookOver = c.redisTookOver
	}
	return reservation.NewContext(ctx, layer, idem.Record{Key: c.key, Fingerprint: c.fp(), Token: token, TookOver: tookOver}, c.s.cfg.retention)
}

// settleInTx decides the outcome of an execution whose fn completed its
// reservation in its own transaction, writing written; val and fnErr are
// what fn returned. Every caller, fn's own included, gets what committed,
// whatever fn returned.
func (c *call) settleInTx(h *hold, written reservation.Ending, val []byte, fnErr error, tier idem.Tier, took time.Duration) outcome {
	s := c.s
	if s.stopped(c.ctx) {
		// Closing: what committed stays committed; a claim that did not
		// commit lapses after the lease.
		return outcome{result: Result{Value: val, Tier: tier}, err: idem.ErrClosed}
	}
	rec, found, sent, err := h.verify(time.Now().Add(s.cfg.lease / 2))
	if err != nil {
		if s.stopped(c.ctx) {
			return outcome{result: Result{Value: val, Tier: tier}, err: idem.ErrClosed}
		}
		// fn ran and its transaction may have committed: never run it
		// again, never release what may be a completed record. Hold the
		// lease and read again in the background.
		c.observe(idem.EventTierError, h.tier, took, err)
		c.verifyLater(h, written)
		if !errors.Is(err, idem.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", idem.ErrUnavailable, err)
		}
		return outcome{result: Result{Value: val, Tier: tier}, err: fmt.Errorf("%w: %w", ErrPending, err)}
	}
	committed, err := c.judge(h, rec, found, sent, written)
	switch {
	case committed:
		c.observe(idem.EventNew, tier, took, nil)
		return outcome{result: Result{Value: rec.Result, Tier: tier}}
	case errors.Is(err, ErrNotCommitted) && fnErr != nil:
		err = fmt.Errorf("%w: %w", err, fnErr)
	}
	return outcome{result: Result{Value: val, Tier: tier}, err: err}
}

// verify reads the key's record in the deciding tier until the tier
// answers, holding the lease between attempts, or until passes (zero: no
// bound) or the Store closes; then it returns the last error. found is
// false when the record is gone; sent is when the answering read was sent.
func (h *hold) verify(until time.Time) (rec idem.Record, found bool, sent time.Time, err error) {
	c, s := h.c, h.c.s
	layer, _ := h.claim()
	return c.readRecord(h.tier, layer, until, func(err error) {
		if h.tier == idem.TierRedis {
			s.redisFailed(c.ctx, c.key, err)
		}
		if time.Since(h.renewed) >= s.cfg.lease/3 {
			// A renewal refused may be fn's own completion that committed:
			// the next read tells.
			h.renew()
		}
	})
}

// readRecord reads the key's record from layer, the tier's, until it
// answers, or until passes (zero: no bound) or the Store closes; then it
// returns the last error. between, when not nil, runs after each failed
// read with its error. found is false when the record is gone; sent is when
// the answering read was sent.
func (c *call) readRecord(tier idem.Tier, layer idem.Layer, until time.Time, between func(err error)) (rec idem.Record, found bool, sent time.Time, err error) {
	s := c.s
	pause := s.retryPause()
	for {
		sent = time.Now()
		ctx, cancel := s.holdBounds(tier).Context(c.ctx, sent)
		rec, err = layer.Get(ctx, c.key)
		cancel()
		c.tierCall(tier, sent, err)
		switch {
		case err == nil:
			return rec, true, sent, nil
		case errors.Is(err, idem.ErrNotFound):
			return idem.Record{}, false, sent, nil
		case s.stopped(c.ctx):
			return idem.Record{}, false, sent, err
		}
		if between != nil {
			between(err)
		}
		if !until.IsZero() && !time.Now().Add(pause).Before(until) {
			return idem.Record{}, false, sent, err
		}
		if !s.sleep(c.ctx, pause) {
			return idem.Record{}, false, sent, err
		}
	}
}

// verifyLater goes on reading what committed in the background, holding
// the lease, until the deciding tier answers or the Store closes.
func (c *call) verifyLater(h *hold, written reservation.Ending) {
	s := c.s
	if !s.track() {
		return // closed meanwhile: an uncommitted claim lapses after the lease
	}
	go func() {
		defer s.wg.Done()
		rec, found, sent, err := h.verify(time.Time{})
		if err == nil {
			_, _ = c.judge(h, rec, found, sent, written)
		}
	}()
}

// judge acts on the record the deciding tier holds once fn, which completed
// its reservation in its own transaction (written says with what), has returned; sent
// is when the read of rec was sent, found false when there is none.
func (c *call) judge(h *hold, rec idem.Record, found bool, sent time.Time, written reservation.Ending) (committed bool, err error) {
	s := c.s
	switch {
	case found && rec.Completed() && rec.Fingerprint == c.fp() && written.Wrote(rec.Result):
		// fn's transaction committed (one of its completions, when it
		// completed more than once): hand the result on as the Store does
		// its own, for no longer than the record lives.
		c.observe(idem.EventCompleted, h.tier, 0, nil)
		lives := lives(rec, sent)
		if h.tier == idem.TierSQL {
			c.publishLater(rec.Result, lives)
		}
		s.cache.put(c.key, c.fp(), rec.Result, lives, time.Now())
		return true, nil
	case found && (rec.Completed() || rec.Fingerprint != c.fp()):
		// Not what fn wrote: another owner took the key over after this
		// one's lease, and its result stands.
		c.releaseRedis()
		err = fmt.Errorf("%w: another owner completed the key", idem.ErrLeaseLost)
		c.observe(idem.EventLeaseLost, h.tier, 0, err)
		return false, err
	}
	// In progress, or gone: fn's transaction did not commit. Release, so
	// that a retry runs again.
	layer, token := h.claim()
	ctx, cancel := s.holdBounds(h.tier).Context(c.ctx, time.Now())
	rerr := layer.Release(ctx, c.key, token)
	cancel()
	c.releaseRedis()
	switch {
	case errors.Is(rerr, idem.ErrLeaseLost):
		err = fmt.Errorf("%w: another owner holds the key", idem.ErrLeaseLost)
		c.observe(idem.EventLeaseLost, h.tier, 0, err)
		return false, err
	case rerr != nil:
		// The claim lapses after the lease; a retry then takes it over.
		c.observe(idem.EventTierError, h.tier, 0, rerr)
	}
	c.observe(idem.EventReleased, h.tier, 0, ErrNotCommitted)
	return false, ErrNotCommitted
}

// ownCompletion reports, for a renewal the deciding tier refused, whether
// the reason is fn's own transaction, which completed the record with what
// it wrote.
func (h *hold) ownCompletion() bool {
	if !h.reserved {
		return false
	}
	written := h.owner.InTx()
	if !written.InTx {
		return false
	}
	c, s := h.c, h.c.s
	layer, _ := h.claim()
	ctx, cancel := s.holdBounds(h.tier).Context(c.ctx, time.Now())
	rec, err := layer.Get(ctx, c.key)
	cancel()
	return err == nil && rec.Completed() && rec.Fingerprint == c.fp() && written.Wrote(rec.Result)
}
