package tiered

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/deadline"
	"github.com/idemkit/idem/internal/guess"
	"github.com/idemkit/idem/internal/schedule"
)

// Store runs functions at most once per key across every tier it was given.
// It is safe for concurrent use. Close it to stop its goroutines.
type Store struct {
	cfg    config
	redis  idem.Layer
	sql    idem.Layer
	waiter idem.Waiter    // redis as a Waiter, or nil
	filler idem.Filler    // redis as a Filler, or nil
	cache  *cache         // nil when off
	health *health        // Redis health; nil without Redis
	guess  *guess.Counter // whether calls need SQL (see overlap.go); with both tiers only
	obs    idem.Observer
	tracer idem.Tracer // obs as a Tracer, or nil

	configLogged [idem.TierSQL + 1]atomic.Bool // a configuration error of the tier was logged

	// flights holds the calls in flight in this process.
	flights flights
	// redisBounds and sqlBounds give each call to Redis and SQL its
	// deadline; redisHoldBounds and sqlHoldBounds each renewal and
	// completion attempt its own, at most lease/8 (see hold). Like the
	// per-call timeouts they replace, Close does not cut a tier call short:
	// it reaches the phases through stopped.
	redisBounds, sqlBounds         *deadline.Bound
	redisHoldBounds, sqlHoldBounds *deadline.Bound
	// renewals starts the renewers of executions whose work outlasts
	// lease/3.
	renewals *schedule.Queue[*hold]

	base   context.Context // parent of all work; cancelled by Close
	stop   context.CancelCauseFunc
	closed atomic.Bool
	// wg counts the goroutines the Store started (executions on goroutines
	// of their own, renewers, background completions); trackMu orders
	// adding to it against Close's Wait.
	trackMu sync.RWMutex
	wg      sync.WaitGroup
}

// New returns a Store. At least one of WithSQL and WithRedis is required;
// every other option has a default (see the Default constants). A missing
// tier and options given nonsense make New fail with one error that names
// each of them and wraps idem.ErrConfig.
func New(opts ...Option) (*Store, error) {
	cfg := defaults()
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: tiered: %w", idem.ErrConfig, err)
	}
	s := &Store{
		cfg:         cfg,
		redis:       cfg.redis,
		sql:         cfg.sql,
		cache:       newCache(cfg.cacheItems, cfg.cacheBytes, cfg.cacheTTL),
		obs:         cfg.observer,
		redisBounds: deadline.New(cfg.redisTimeout),
		sqlBounds:   deadline.New(cfg.sqlTimeout),
	}
	s.redisHoldBounds = deadline.New(holdTimeout(cfg.redisTimeout, cfg.lease))
	s.sqlHoldBounds = deadline.New(holdTimeout(cfg.sqlTimeout, cfg.lease))
	s.renewals = schedule.New(s.startRenewer)
	s.tracer, _ = s.obs.(idem.Tracer)
	if s.redis != nil {
		s.waiter, _ = s.redis.(idem.Waiter)
		s.filler, _ = s.redis.(idem.Filler)
		s.health = newHealth(cfg.redisFailures, cfg.redisCooldown, cfg.observer, cfg.logger, cfg.sql != nil)
		if s.sql != nil {
			// A new Store expects duplicates, so that its first ones (a
			// restart amid retries) cost the database nothing; the first
			// call that needs SQL turns overlapping on.
			s.guess = guess.New(false)
		}
	}
	s.base, s.stop = context.WithCancelCause(context.Background())
	if j := cfg.janitor; j != nil && s.track() {
		go func() {
			defer s.wg.Done()
			ctx := s.base
			if s.obs != nil {
				ctx = idem.ContextWithObserver(ctx, s.obs)
			}
			_ = j.Run(ctx) // it reports its own failures; it returns when ctx ends
		}()
	}
	return s, nil
}

// Close cancels the work still running (its context ends, the key is
// released) and waits for every goroutine the Store started. A completion
// still pending is abandoned: its claim lapses after the lease. It does not
// close the layers: their owner does. Calls after Close get [idem.ErrClosed].
func (s *Store) Close() error {
	s.trackMu.Lock()
	already := s.closed.Swap(true)
	s.trackMu.Unlock()
	if already {
		return nil
	}
	s.stop(idem.ErrClosed)
	s.renewals.Stop()
	s.flights.cancelWork(idem.ErrClosed)
	s.wg.Wait()
	return nil
}

// track counts a goroutine the Store is about to start, which must call
// s.wg.Done when it ends. After Close it reports false and counts nothing:
// Close may be waiting already.
func (s *Store) track() bool {
	s.trackMu.RLock()
	defer s.trackMu.RUnlock()
	if s.closed.Load() {
		return false
	}
	s.wg.Add(1)
	return true
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
