package redislayer

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of a Layer.
const (
	// DefaultPrefix starts every key the layer writes.
	DefaultPrefix = "idem:"
	// DefaultTimeout bounds each call to Redis. Redis answers a local call
	// in well under a millisecond; 250 ms is long enough for a busy server
	// across a network and short enough that a dead or paused Redis costs a
	// request little before the caller falls back to SQL.
	DefaultTimeout = 250 * time.Millisecond
	// DefaultMaxResult is the largest result Complete and Fill accept
	// (8 MiB), the same limit as memlayer's, so that a result one tier keeps
	// is not refused by another. It holds a 1 MiB response body with room
	// for its encoding; raise WithTimeout along with it on slow links.
	DefaultMaxResult = 8 << 20
)

// MaxFingerprint is the longest fingerprint, in bytes, that Reserve and Fill
// accept (the record header gives its length five digits). A fingerprint is
// normally a short digest.
const MaxFingerprint = 99999

// Option configures a Layer. An option given nonsense makes New fail.
type Option func(*Layer) error

// WithPrefix sets the prefix of every key and channel name. Default
// DefaultPrefix ("idem:"). Several applications sharing one Redis use
// distinct prefixes. "" is no prefix. A prefix with '{' or '}', which would
// change the hash tag that keeps a key's entries in one Cluster slot, is an
// error.
func WithPrefix(prefix string) Option {
	return func(l *Layer) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("WithPrefix(%q): the prefix must not contain '{' or '}'", prefix)
		}
		l.prefix = prefix
		return nil
	}
}

// WithTimeout bounds each call to Redis (one round trip, with go-redis's own
// retries inside it): past d the call fails with idem.ErrUnavailable.
// Default DefaultTimeout (250 ms). 0 means no timeout of the layer's own:
// the caller's context and the client's own timeouts (ReadTimeout,
// WriteTimeout) then bound a call, and a paused server holds it that long.
// A negative d is an error. The bound is a context deadline, which go-redis
// applies to socket reads and writes only when the client has
// ContextTimeoutEnabled set (see New).
func WithTimeout(d time.Duration) Option {
	return func(l *Layer) error {
		if d < 0 {
			return fmt.Errorf("WithTimeout(%v): negative (0 means no timeout of the layer's own)", d)
		}
		l.timeout = d
		return nil
	}
}

// WithMaxResult sets the largest result Complete and Fill accept, in bytes;
// a larger one gives idem.ErrTooLarge before any call to Redis. Default
// DefaultMaxResult (8 MiB). 0 means no limit of the layer's own (Redis
// refuses values over its proto-max-bulk-len, 512 MB by default). A
// negative n is an error.
func WithMaxResult(n int) Option {
	return func(l *Layer) error {
		if n < 0 {
			return fmt.Errorf("WithMaxResult(%d): negative (0 means no limit)", n)
		}
		l.maxResult = n
		return nil
	}
}

// WithReserveOrder sets the order of Reserve's commands. Default
// [idem.OrderAdaptive]: GET first while most keys arrive already taken, the
// claim first while most are new. [idem.OrderOneStatement] is
// [idem.OrderClaimFirst] here. A value that is none of the idem.Order
// constants is an error.
func WithReserveOrder(o idem.ReserveOrder) Option {
	return func(l *Layer) error {
		if o > idem.OrderOneStatement {
			return fmt.Errorf("WithReserveOrder(%d): not an idem.ReserveOrder", o)
		}
		l.order = o
		return nil
	}
}
