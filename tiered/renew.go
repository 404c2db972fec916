package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// renew keeps the claims stok (SQL) and rtok (Redis) alive while fn runs,
// renewing both every lease/3. When the deciding tier refuses the token, or
// cannot be reached before the lease would lapse, it cancels the work with
// cause idem.ErrLeaseLost. The returned stop waits for the goroutine to end.
func (s *Store) renew(ctx context.Context, cancel context.CancelCauseFunc, key idem.Key, stok, rtok string, expiry time.Time) (stop func()) {
	if stok == "" && rtok == "" {
		return func() {}
	}
	every := s.cfg.lease / 3
	done, exited := make(chan struct{}), make(chan struct{})
	s.wg.Add(1)
	// Most work ends before its first renewal: the renewer starts only when
	// that is due, so short work costs a timer, not a goroutine.
	timer := time.AfterFunc(every, func() {
		defer s.wg.Done()
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		// expiry is when the lease lapses at the earliest, as far as this
		// process can tell: a lease runs from when the store executed the
		// claim or renewal, which is after it was sent, so the send time
		// minus a margin for clock rate and scheduling is safe.
		margin := s.leaseMargin()
		for {
			sent := time.Now()
			// A renewal that has not succeeded by the expiry is worthless:
			// bound it by the lease, not only by the tier's timeout.
			decided, lost := s.renewOnce(ctx, key, stok, &rtok, expiry)
			if lost {
				s.observe(ctx, idem.EventLeaseLost, s.decider(), key, 0, idem.ErrLeaseLost)
				cancel(idem.ErrLeaseLost)
				return
			}
			if decided {
				expiry = sent.Add(s.cfg.lease - margin)
			} else if time.Until(expiry) <= every {
				// The next renewal would come after the lease lapses: another
				// owner may take over, so this one must stop.
				s.observe(ctx, idem.EventLeaseLost, s.decider(), key, 0, idem.ErrUnavailable)
				cancel(idem.ErrLeaseLost)
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		close(done)
		if timer.Stop() {
			s.wg.Done() // the renewer never started
			return
		}
		<-exited
	}
}

// leaseMargin is how much earlier than the store this process considers a
// lease lapsed.
func (s *Store) leaseMargin() time.Duration { return s.cfg.lease / 10 }

// renewOnce renews each claim once, each call bounded by expiry. decided
// reports whether the deciding tier renewed; lost whether it refused the
// token.
func (s *Store) renewOnce(ctx context.Context, key idem.Key, stok string, rtok *string, expiry time.Time) (decided, lost bool) {
	if stok != "" {
		sctx, c := context.WithTimeout(ctx, min(s.cfg.sqlTimeout, time.Until(expiry)))
		err := s.sql.Renew(sctx, key, stok, s.cfg.lease)
		c()
		if errors.Is(err, idem.ErrLeaseLost) {
			return false, true
		}
		decided = err == nil
		if err != nil {
			s.observe(ctx, idem.EventTierError, idem.TierSQL, key, 0, err)
		}
	}
	if *rtok != "" {
		rctx, c := context.WithTimeout(ctx, min(s.cfg.redisTimeout, time.Until(expiry)))
		err := s.redis.Renew(rctx, key, *rtok, s.cfg.lease)
		c()
		switch {
		case err == nil:
			s.health.ok(ctx)
		case errors.Is(err, idem.ErrLeaseLost):
			if s.sql == nil {
				return false, true
			}
			*rtok = "" // Redis lost it (flush, eviction); SQL still decides
		default:
			s.redisFailed(ctx, key, err)
		}
		if s.sql == nil {
			decided = err == nil
		}
	}
	return decided, false
}

// decider returns the tier whose claim decides.
func (s *Store) decider() idem.Tier {
	if s.sql != nil {
		return idem.TierSQL
	}
	return idem.TierRedis
}
