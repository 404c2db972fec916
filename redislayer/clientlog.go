package redislayer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// ClientLogger writes go-redis's own messages to a *slog.Logger. go-redis
// prints them through one process-wide logger, by default to stderr,
// and prints a failed dial on every call that dials: with Redis down, on
// every probe of a Store. idem never replaces that logger; a program that
// wants go-redis's messages in its own log installs a ClientLogger itself:
//
//	redis.SetLogger(redislayer.NewClientLogger(logger))
//
// Failed dials are written at Debug: a Store reports the loss of Redis
// and its return once per change, at Warn and Info, through its own logger
// (tiered.WithLogger), and every failed call reaches its observer. Every
// other message of go-redis's is written at Warn. Each record carries
// "source"="go-redis".
type ClientLogger struct {
	l *slog.Logger // nil: slog.Default()
}

// NewClientLogger returns a ClientLogger that writes to l. A nil l means
// slog.Default() at the time of each message.
func NewClientLogger(l *slog.Logger) *ClientLogger { return &ClientLogger{l: l} }

// Printf writes one message of go-redis's: the format and arguments go-redis
// gives, with the context of the call that caused it. It is go-redis's
// logging interface (redis.SetLogger).
func (c *ClientLogger) Printf(ctx context.Context, format string, v ...any) {
	l := c.l
	if l == nil {
		l = slog.Default()
	}
	level := slog.LevelWarn
	if strings.Contains(format, "failed to dial") {
		// go-redis's connection pool: "redis: connection pool: failed to
		// dial after %d attempts: %v", once per call that dialed.
		level = slog.LevelDebug
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	l.LogAttrs(ctx, level, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), slog.String("source", "go-redis"))
}
