package redislayer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mix"
	"github.com/idemkit/idem/internal/option"
)

var (
	_ idem.Layer  = (*Layer)(nil)
	_ idem.Waiter = (*Layer)(nil)
	_ idem.Filler = (*Layer)(nil)
)

// Client is what the layer needs of a go-redis client: scripts, a command,
// a pipeline (Reserve's PTTL with its GET or SET NX PX GET, in one round
// trip), and a subscription for Wait. *redis.Client (also what
// redis.NewFailoverClient returns for Sentinel), *redis.ClusterClient and
// *redis.Ring meet it, and so does a test wrapper around any of them.
type Client interface {
	redis.Scripter
	// Process runs one command.
	Process(ctx context.Context, cmd redis.Cmder) error
	// Pipeline returns a pipeline, whose commands go to the server in one
	// round trip.
	Pipeline() redis.Pipeliner
	// Subscribe opens a subscription (go-redis PubSub) to channels.
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	// Sentinel: redis.NewFailoverClient returns a *redis.Client, checked above.
)

// Layer is an idem.Layer on Redis, with the optional idem.Waiter and
// idem.Filler. It is safe for concurrent use. The zero value is not usable;
// call New.
type Layer struct {
	client  Client
	prefix  string
	timeout time.Duration // WithTimeout: the layer's own round trips
	order   idem.ReserveOrder
	hub     *hub

	seen  mix.Existing // the share of Reserve calls that found their key taken
	pipes sync.Pool    // of redis.Pipeliner over client, empty between uses

	// scriptOnly is set once the server refused SET with both NX and GET
	// (Redis before 7.0): Reserve then runs reserve.lua alone.
	scriptOnly atomic.Bool
}

// New returns a Layer over client, configured by opts over the defaults.
// The client stays the caller's: Close does not close it, and the caller
// closes it after the layer. A nil client, or options given nonsense, make
// New fail with an error that names each fault and wraps idem.ErrConfig.
//
// Each call is bounded by its context's deadline, which its caller sets (a
// tiered.Store's WithTimeouts), and each round trip inside a Wait by
// WithTimeout. go-redis honours a context's deadline on socket reads and
// writes only when the client's options have ContextTimeoutEnabled set;
// without it a paused server holds a call for the client's ReadTimeout
// instead. Set ContextTimeoutEnabled: true, or ReadTimeout and WriteTimeout
// no longer than those timeouts.
func New(client Client, opts ...Option) (*Layer, error) {
	c := defaults()
	faults := option.Apply(&c, opts)
	if client == nil {
		faults = append(faults, errors.New("New: give a client (a *redis.Client, *redis.ClusterClient or *redis.Ring); got nil"))
	}
	if err := option.Refuse("redislayer", faults...); err != nil {
		return nil, err
	}
	l := &Layer{client: client, prefix: c.prefix, timeout: c.timeout, order: c.order}
	l.hub = newHub(client, c.timeout)
	l.pipes.New = func() any { return client.Pipeline() }
	return l, nil
}

// Close stops the layer's subscription goroutines and ends every Wait in
// progress with idem.ErrUnavailable. It does not close the client, and the
// other methods keep working as long as the client is open. Close is safe to
// call more than once; it always returns nil.
func (l *Layer) Close() error {
	l.hub.close()
	return nil
}

// bound returns ctx limited by the layer's own timeout, for a round trip
// the layer makes inside a longer call (a Wait's). A caller's deadline that
// comes first is kept as it is, at no cost, and so is ctx when the layer
// has no timeout of its own.
func (l *Layer) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout == 0 {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= l.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.timeout)
}

// millis converts d to whole milliseconds for PX and PEXPIRE, rounding up, so
// that a positive duration never becomes 0: PEXPIRE 0 would delete the key at
// once (the trap of passing a sub-millisecond TTL to redislock).
func millis(d time.Duration) int64 {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}

func fromMillis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
