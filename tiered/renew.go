package tiered

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/deadline"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/internal/schedule"
)

// hold is the owner's hold on its call's claims: which tier's claim
// decides, until when its lease surely lasts, and the renewals and
// completion attempts that keep it. A lease protects until the completion is
// decided, not until fn returns (DESIGN §9): the hold renews while fn runs
// and, between completion attempts, until the deciding tier accepts or
// refuses the result.
type hold struct {
	c    *call
	tier idem.Tier // the deciding claim's tier; TierNone when there is no claim
	// reserved says that fn was given a reservation, whose owner handle
	// tells whether fn completed it in a transaction of its own.
	reserved bool
	owner    *reservation.State
	expiry   time.Time // when the deciding lease lapses at the earliest, by this process's clock
	renewed  time.Time // when the last accepted renewal, or the claim, was sent
}

// hold returns the call's hold on its claims, as they stand after the
// phases that claimed them. It lives in the call; the call's work takes it
// once.
func (c *call) hold() *hold {
	h := &c.h
	h.c = c // the rest is zero: the call is new
	switch {
	case c.sqlToken != "":
		h.tier, h.renewed = idem.TierSQL, c.sqlSent
	case c.redisToken != "":
		h.tier, h.renewed = idem.TierRedis, c.redisSent
	default:
		return h
	}
	// The lease runs from when the store executed the claim, which is after
	// it was sent: count from the send, less a margin for clock rate and
	// scheduling.
	h.expiry = h.renewed.Add(c.s.cfg.lease - c.s.leaseMargin())
	return h
}

// claim returns the deciding tier's layer and this process's token in it.
func (h *hold) claim() (idem.Layer, string) {
	if h.tier == idem.TierRedis {
		return h.c.s.redis, h.c.redisToken
	}
	return h.c.s.sql, h.c.sqlToken
}

// claimed reports whether there is a claim to hold.
func (h *hold) claimed() bool { return h.tier != idem.TierNone }

// Timings of a hold, from the lease. The layers give a lapsed lease a grace
// of lease/4 before another owner may take it over; the owner's attempts
// must fit in it with room to spare, so that once an outage ends its
// completion lands before the grace ends: an attempt stuck when the store
// came back ends within attemptTimeout, and the next starts within
// retryPause.

// leaseMargin is how much earlier than the store this process considers a
// lease lapsed.
func (s *Store) leaseMargin() time.Duration { return s.cfg.lease / 10 }

// retryPause is the pause between failed renewal or completion attempts.
func (s *Store) retryPause() time.Duration { return min(s.cfg.pollMax, s.cfg.lease/16) }

// holdTimeout bounds one renewal or completion attempt on a tier whose
// calls are bounded by timeout: at most lease/8, also when the tier's calls
// have no bound of the Store's own (timeout 0), since a hold must fit its
// attempts in the grace a lapsed lease gets.
func holdTimeout(timeout, lease time.Duration) time.Duration {
	if timeout == 0 {
		return lease / 8
	}
	return min(timeout, lease/8)
}

// holdBounds gives the deadline of one renewal or completion attempt in
// tier: its timeout, but at most lease/8.
func (s *Store) holdBounds(tier idem.Tier) *deadline.Bound {
	if tier == idem.TierSQL {
		return s.sqlHoldBounds
	}
	return s.redisHoldBounds
}

// renew renews each claim once. decided reports whether the deciding tier
// renewed; lost whether it refused the token.
func (h *hold) renew() (decided, lost bool) {
	c, s := h.c, h.c.s
	sent := time.Now()
	if c.sqlToken != "" {
		ctx, cancel := s.sqlHoldBounds.Context(c.ctx, sent)
		err := s.sql.Renew(ctx, c.key, c.sqlToken, s.cfg.lease)
		cancel()
		if errors.Is(err, idem.ErrLeaseLost) {
			return false, true
		}
		decided = err == nil
		if err != nil {
			c.observe(idem.EventTierError, idem.TierSQL, 0, err)
		}
	}
	if c.redisToken != "" {
		ctx, cancel := s.redisHoldBounds.Context(c.ctx, time.Now())
		err := s.redis.Renew(ctx, c.key, c.redisToken, s.cfg.lease)
		cancel()
		switch {
		case err == nil:
			s.health.ok(c.ctx)
		case errors.Is(err, idem.ErrLeaseLost):
			if h.tier == idem.TierRedis {
				return false, true
			}
			c.redisToken = "" // Redis lost it (flush, eviction); SQL still decides
		default:
			s.redisFailed(c.ctx, c.key, err)
		}
		if h.tier == idem.TierRedis {
			decided = err == nil
		}
	}
	if decided {
		h.renewed = sent
		h.expiry = sent.Add(s.cfg.lease - s.leaseMargin())
		c.observe(idem.EventRenewed, h.tier, 0, nil)
	}
	return decided, false
}

// complete stores val in the deciding tier under the call's token, holding
// the lease between attempts, until the tier accepts it (accepted is when
// the accepted attempt was sent), refuses the token (idem.ErrLeaseLost) or
// the result (idem.ErrTooLarge), the Store closes, or until passes (zero:
// no bound); then it returns the last error. now, when not zero, is a
// reading of the clock taken just before: the first attempt's send time.
func (h *hold) complete(val []byte, now, until time.Time) (accepted time.Time, err error) {
	c, s := h.c, h.c.s
	layer, token := h.claim()
	pause := s.retryPause()
	for {
		sent := now
		if sent.IsZero() {
			sent = time.Now()
		}
		now = time.Time{} // the next attempt reads the clock
		ctx, cancel := c.bounded(s.holdBounds(h.tier), boundCompletion, sent)
		err = layer.Complete(ctx, c.key, token, val, s.cfg.retention)
		cancel()
		c.tierCall(h.tier, sent, err)
		if err == nil {
			c.observe(idem.EventCompleted, h.tier, 0, nil)
			return sent, nil
		}
		if errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrTooLarge) || s.stopped(c.ctx) {
			return time.Time{}, err
		}
		if h.tier == idem.TierRedis {
			s.redisFailed(c.ctx, c.key, err)
		}
		// The tier did not answer, or failed: hold the lease while the
		// completion waits (a renewal may get through where the completion
		// did not, and it keeps the grace for when the store is back).
		if time.Since(h.renewed) >= s.cfg.lease/3 {
			if _, lost := h.renew(); lost {
				return time.Time{}, idem.ErrLeaseLost
			}
		}
		if !until.IsZero() && !time.Now().Add(pause).Before(until) {
			return time.Time{}, err
		}
		if !s.sleep(c.ctx, pause) {
			return time.Time{}, err
		}
	}
}

// renewWhile starts renewing the claims while fn runs: every lease/3, or
// every retryPause after a failure. When the deciding tier refuses the
// token, or the lease may lapse before a renewal gets through, it cancels
// the work with cause idem.ErrLeaseLost — and goes on trying, since a
// result fn returns anyway is still completed if the token holds. Call stop
// on the result when fn returns.
func (h *hold) renewWhile(cancel context.CancelCauseFunc) *renewal {
	if !h.claimed() {
		return nil
	}
	s := h.c.s
	if s.closed.Load() {
		return nil // closed: the work's context is cancelled already
	}
	r := &h.c.ren // zero: the call is new, and renews once
	r.cancel = cancel
	r.first = schedule.Item[*hold]{Due: h.renewed.Add(s.cfg.lease / 3), Value: h}
	// Most work ends before its first renewal: the renewer starts only when
	// that is due, so short work costs a place in the Store's queue, not a
	// goroutine nor a timer of its own (see Store.renewals).
	s.renewals.Add(&r.first)
	return r
}

// startRenewer starts the renewer of h, whose first renewal is due, on a
// goroutine of its own; after Close, none.
func (s *Store) startRenewer(h *hold) {
	if s.track() {
		go h.c.ren.run()
	}
}

// renewal is the renewer of one execution's claims while fn runs. It lives
// in the call.
type renewal struct {
	cancel context.CancelCauseFunc // the work's
	// first is the place in the Store's queue of renewals until the first
	// renewal is due: then the renewer starts. Its Value is the hold the
	// renewals keep.
	first schedule.Item[*hold]

	mu      sync.Mutex
	stopped bool          // stop was called
	done    chan struct{} // made when the renewer starts; closed by stop
	exited  chan struct{} // closed when the renewer returns
}

func (r *renewal) run() {
	h := r.first.Value
	c, s := h.c, h.c.s
	r.mu.Lock()
	if r.stopped { // stop came between the timer firing and now
		r.mu.Unlock()
		s.wg.Done()
		return
	}
	r.done, r.exited = make(chan struct{}), make(chan struct{})
	r.mu.Unlock()
	defer s.wg.Done()
	defer close(r.exited)
	every, pause := s.cfg.lease/3, s.retryPause()
	attempt := s.holdBounds(h.tier).Timeout()
	cancelled := false
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		decided, lost := h.renew()
		next := every
		switch {
		case lost && h.ownCompletion():
			// fn's own transaction completed the key: there is no lease
			// left to hold, and the work goes on.
			return
		case lost:
			c.observe(idem.EventLeaseLost, h.tier, 0, idem.ErrLeaseLost)
			r.cancel(idem.ErrLeaseLost)
			return
		case !decided:
			next = pause
			if !cancelled && time.Until(h.expiry) <= pause+attempt {
				// The lease may lapse before a renewal gets through, and
				// another owner may then take over: the work must stop.
				cancelled = true
				c.observe(idem.EventLeaseLost, h.tier, 0, idem.ErrUnavailable)
				r.cancel(idem.ErrLeaseLost)
			}
		}
		t.Reset(next)
		select {
		case <-r.done:
			return
		case <-s.base.Done():
			return
		case <-t.C:
		}
	}
}

// stop ends the renewal and waits for a running renewer to return; after it
// no renewal is sent. r may be nil.
func (r *renewal) stop() {
	if r == nil {
		return
	}
	if r.first.Value.c.s.renewals.Remove(&r.first) {
		return // the renewer never started
	}
	r.mu.Lock()
	r.stopped = true
	done, exited := r.done, r.exited
	r.mu.Unlock()
	if done != nil {
		close(done)
		<-exited
	}
}
