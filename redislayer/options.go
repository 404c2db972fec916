package redislayer

import (
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

// Option configures a Layer.
type Option func(*Layer)

// WithPrefix sets the prefix of every key and channel name. Default
// DefaultPrefix. Several applications sharing one Redis use distinct
// prefixes; the prefix must not contain '{' or '}', which would change the
// hash tag (New panics if it does).
func WithPrefix(prefix string) Option { return func(l *Layer) { l.prefix = prefix } }

// WithTimeout bounds each call to Redis (one round trip, with go-redis's own
// retries inside it): past d the call fails with idem.ErrUnavailable.
// Default DefaultTimeout; d <= 0 keeps the default. The bound is a context
// deadline, which go-redis applies to socket reads and writes only when the
// client has ContextTimeoutEnabled set (see New).
func WithTimeout(d time.Duration) Option {
	return func(l *Layer) {
		if d > 0 {
			l.timeout = d
		}
	}
}

// WithMaxResult sets the largest result Complete and Fill accept; a larger
// one gives idem.ErrTooLarge before any call to Redis. Default
// DefaultMaxResult; n <= 0 means no limit of the layer's own (Redis refuses
// values over its proto-max-bulk-len, 512 MB by default).
func WithMaxResult(n int) Option { return func(l *Layer) { l.maxResult = n } }

// WithReserveOrder sets the order of Reserve's commands. Default
// [idem.OrderAdaptive]: GET first while most keys arrive already taken, the
// claim first while most are new. [idem.OrderOneStatement] is
// [idem.OrderClaimFirst] here.
func WithReserveOrder(o idem.ReserveOrder) Option { return func(l *Layer) { l.order = o } }
