package tiered

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// renew keeps the claims stok (SQL) and rtok (Redis) alive while fn runs,
// renewing both every lease/3. When the deciding tier refuses the token, or
// cannot be reached before the lease would lapse, it cancels the work with
// cause idem.ErrLeaseLost. Call stop on the result (nil when there is no
// claim) when fn returns: it waits for the renewer to end.
func (s *Store) renew(ctx context.Context, cancel context.CancelCauseFunc, key idem.Key, stok, rtok string, expiry time.Time) *renewal {
	if stok == "" && rtok == "" {
		return nil
	}
	r := &renewal{s: s, ctx: ctx, cancel: cancel, key: key, stok: stok, rtok: rtok, expiry: expiry}
	s.wg.Add(1)
	// Most work ends before its first renewal: the renewer starts only when
	// that is due, so short work costs a timer, not a goroutine (nor the
	// renewer's channels).
	r.timer = time.AfterFunc(s.cfg.lease/3, r.run)
	return r
}

// renewal is one execution's renewer (see Store.renew).
type renewal struct {
	s          *Store
	ctx        context.Context
	cancel     context.CancelCauseFunc
	key        idem.Key
	stok, rtok string
	expiry     time.Time // when the lease lapses at the earliest
	timer      *time.Timer

	mu      sync.Mutex
	stopped bool          // stop was called
	done    chan struct{} // made when the renewer starts; closed by stop
	exited  chan struct{} // closed when the renewer returns
}

// run renews every lease/3 until stop, the work's end or a lost lease.
func (r *renewal) run() {
	s := r.s
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
	every := s.cfg.lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	// expiry is when the lease lapses at the earliest, as far as this
	// process can tell: a lease runs from when the store executed the claim
	// or renewal, which is after it was sent, so the send time minus a
	// margin for clock rate and scheduling is safe.
	margin := s.leaseMargin()
	for {
		sent := time.Now()
		// A renewal that has not succeeded by the expiry is worthless: bound
		// it by the lease, not only by the tier's timeout.
		decided, lost := s.renewOnce(r.ctx, r.key, r.stok, &r.rtok, r.expiry)
		if lost {
			s.observe(r.ctx, idem.EventLeaseLost, s.decider(), r.key, 0, idem.ErrLeaseLost)
			r.cancel(idem.ErrLeaseLost)
			return
		}
		if decided {
			r.expiry = sent.Add(s.cfg.lease - margin)
		} else if time.Until(r.expiry) <= every {
			// The next renewal would come after the lease lapses: another
			// owner may take over, so this one must stop.
			s.observe(r.ctx, idem.EventLeaseLost, s.decider(), r.key, 0, idem.ErrUnavailable)
			r.cancel(idem.ErrLeaseLost)
			return
		}
		select {
		case <-r.done:
			return
		case <-r.ctx.Done():
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
	if r.timer.Stop() {
		r.s.wg.Done() // the renewer never started
		return
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
