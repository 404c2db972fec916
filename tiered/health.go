package tiered

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/breaker"
)

// health tracks whether the Redis tier is worth asking (see
// breaker.Breaker: after WithRedisFallback's failures in a row Redis is
// skipped for its cool-down, then probed), and reports each switch, once,
// to the Store's observer (EventFallbackOn when Redis is switched off,
// EventFallbackOff when it is back) and to its logger (WithLogger). A
// failed probe switches nothing, so it reports nothing.
type health struct {
	breaker  *breaker.Breaker
	obs      idem.Observer
	log      *slog.Logger // nil: slog.Default()
	cooldown time.Duration
	sqlToo   bool // SQL decides while Redis is off (else calls fail)
}

func newHealth(maxFailures int, cooldown time.Duration, obs idem.Observer, log *slog.Logger, sqlToo bool) *health {
	return &health{breaker: breaker.New(maxFailures, cooldown), obs: obs, log: log, cooldown: cooldown, sqlToo: sqlToo}
}

// logger returns the logger of the Store's own messages.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// allow reports whether a call may use Redis now. When it returns probe
// true, the caller is the one probe of a tier that was off and must report
// its outcome with ok or fail.
func (h *health) allow(now time.Time) (use, probe bool) { return h.breaker.Allow(now) }

// ok records a Redis call that succeeded.
func (h *health) ok(ctx context.Context) {
	if !h.breaker.Success() {
		return
	}
	if h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOff, Tier: idem.TierRedis})
	}
	logger(h.log).LogAttrs(ctx, slog.LevelInfo, "idem: redis answers again and is used again", slog.String("tier", "redis"))
}

// fail records a Redis call that failed with err at now.
func (h *health) fail(ctx context.Context, err error, now time.Time) {
	if !h.breaker.Failure(now) {
		return
	}
	if h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOn, Tier: idem.TierRedis, Err: err})
	}
	msg := "idem: redis is switched off after repeated failures; SQL decides alone until a probe answers"
	if !h.sqlToo {
		msg = "idem: redis is switched off after repeated failures; calls fail until a probe answers"
	}
	logger(h.log).LogAttrs(ctx, slog.LevelWarn, msg, slog.String("tier", "redis"),
		slog.Duration("probe_every", h.cooldown), slog.String("err", err.Error()))
}

// isOff reports whether Redis is currently switched off.
func (h *health) isOff() bool { return h.breaker.Off() }
