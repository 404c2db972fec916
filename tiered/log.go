package tiered

import (
	"context"
	"log/slog"

	"github.com/idemkit/idem"
)

// LogObserver returns an Observer that logs events with l: replays, new
// runs and waits at Debug; mismatches, in-flight answers and releases at
// Info; tier errors, fallbacks, takeovers and lost leases at Warn. Keys are
// logged redacted (idem.Key.String: a digest prefix, never the scope or the
// client key). A nil l means slog.Default().
func LogObserver(l *slog.Logger) idem.Observer {
	if l == nil {
		l = slog.Default()
	}
	return logObserver{l}
}

type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(ctx context.Context, e idem.Event) {
	level := slog.LevelDebug
	switch e.Kind {
	case idem.EventMismatch, idem.EventInFlight, idem.EventReleased:
		level = slog.LevelInfo
	case idem.EventTierError, idem.EventFallbackOn, idem.EventFallbackOff, idem.EventLeaseLost, idem.EventTakeover, idem.EventGrace:
		level = slog.LevelWarn
	}
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 4)
	attrs = append(attrs, slog.String("tier", e.Tier.String()))
	if !e.Key.IsZero() {
		attrs = append(attrs, slog.String("key", e.Key.String()))
	}
	if e.Duration > 0 {
		attrs = append(attrs, slog.Duration("took", e.Duration))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, "idem "+e.Kind.String(), attrs...)
}
