package tiered

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// observe reports an event of the Store's to its observer, if it has one.
func (s *Store) observe(ctx context.Context, kind idem.EventKind, tier idem.Tier, key idem.Key, d time.Duration, err error) {
	if s.obs != nil {
		s.obs.Observe(ctx, idem.Event{Kind: kind, Tier: tier, Key: key, Duration: d, Err: err})
	}
}

// redisFailed records a Redis failure: an event, and a strike towards
// switching Redis off. A caller's own cancellation is no strike.
func (s *Store) redisFailed(ctx context.Context, key idem.Key, err error) {
	if errors.Is(err, context.Canceled) && s.stopped(ctx) {
		return
	}
	s.observe(ctx, idem.EventTierError, idem.TierRedis, key, 0, err)
	if errors.Is(err, idem.ErrConfig) {
		s.misconfigured(ctx, idem.TierRedis, err)
	}
	s.health.fail(ctx, err, time.Now())
}

// misconfigured reports a configuration error of tier once per Store and
// tier: the observer hears every one (EventTierError), but a Store without
// an observer would otherwise fail every request without a word in the log
// (a forgotten Init looks like an outage), so it logs the first through its
// logger — as does a Store with an observer whose logger was given
// (WithLogger).
func (s *Store) misconfigured(ctx context.Context, tier idem.Tier, err error) {
	if s.obs != nil && s.cfg.logger == nil || !s.configLogged[tier].CompareAndSwap(false, true) {
		return
	}
	logger(s.cfg.logger).ErrorContext(ctx, "idem: configuration error: every call that needs this tier fails until it is fixed",
		slog.String("tier", tier.String()), slog.String("err", err.Error()))
}
