package tiered

import (
	"context"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/breaker"
)

// health tracks whether the Redis tier is worth asking (see
// breaker.Breaker: after WithRedisFallback's failures in a row Redis is
// skipped for its cool-down, then probed), and reports each switch to the
// Store's observer: EventFallbackOn when Redis is switched off and SQL
// decides alone, EventFallbackOff when it is back.
type health struct {
	breaker *breaker.Breaker
	obs     idem.Observer
}

func newHealth(maxFailures int, cooldown time.Duration, obs idem.Observer) *health {
	return &health{breaker: breaker.New(maxFailures, cooldown), obs: obs}
}

// allow reports whether a call may use Redis now. When it returns probe
// true, the caller is the one probe of a tier that was off and must report
// its outcome with ok or fail.
func (h *health) allow(now time.Time) (use, probe bool) { return h.breaker.Allow(now) }

// ok records a Redis call that succeeded.
func (h *health) ok(ctx context.Context) {
	if h.breaker.Success() && h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOff, Tier: idem.TierRedis})
	}
}

// fail records a Redis call that failed with err at now.
func (h *health) fail(ctx context.Context, err error, now time.Time) {
	if h.breaker.Failure(now) && h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOn, Tier: idem.TierRedis, Err: err})
	}
}

// isOff reports whether Redis is currently switched off.
func (h *health) isOff() bool { return h.breaker.Off() }
