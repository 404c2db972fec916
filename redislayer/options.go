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
	// DefaultTimeout bounds each round trip the layer makes of its own
	// accord (see WithTimeout). Redis answers a local call in well under a
	// millisecond; 250 ms is long enough for a busy server across a network
	// and short enough that a waiter on a dead or paused Redis soon falls
	// back to SQL.
	DefaultTimeout = 250 * time.Millisecond
)

// Option configures a Layer. Options apply in order over the defaults; an
// option given nonsense makes New fail.
//
// The layer has no result limit of its own: it refuses a result over
// idem.MaxResult, as every layer does.
type Option func(*config) error

type config struct {
	prefix  string
	timeout time.Duration
	order   idem.ReserveOrder
}

func defaults() config {
	return config{prefix: DefaultPrefix, timeout: DefaultTimeout}
}

// WithPrefix sets the prefix of every key and channel name. Default
// DefaultPrefix ("idem:"). Several applications sharing one Redis use
// distinct prefixes. "" is no prefix. A prefix with '{' or '}', which would
// change the hash tag that keeps a key's entries in one Cluster slot, is an
// error.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("WithPrefix: give a prefix without '{' or '}', which would move a key's entries out of its Cluster slot (got %q)", prefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithTimeout bounds each round trip that the layer itself makes, which no
// caller's call bounds: the subscription and the reads inside a Wait (one
// call that lasts as long as its caller waits), and the UNSUBSCRIBE when a
// channel's last waiter leaves. Past d such a round trip fails and Wait
// returns idem.ErrUnavailable, so that a waiter on a dead or paused Redis
// falls back to SQL. Default DefaultTimeout (250 ms). 0 means no bound of
// the layer's own: the caller's context and the client's ReadTimeout and
// WriteTimeout then bound them. A negative d is an error.
//
// Every other call (Reserve, Get, Complete, Renew, Release, Fill, Check)
// is one round trip made for a caller, and bounded by its caller's
// context: a tiered.Store bounds each call it makes with its WithTimeouts.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithTimeout: give 0 (no bound of the layer's own) or more (got %v)", d)
		}
		c.timeout = d
		return nil
	}
}

// WithReserveOrder sets the order of Reserve's commands. Default
// [idem.OrderAdaptive]: GET first while most keys arrive already taken, the
// claim first while most are new. Every order is one round trip in Redis.
// A value that is none of the idem.Order constants (sqllayer's own orders
// included) is an error.
func WithReserveOrder(o idem.ReserveOrder) Option {
	return func(c *config) error {
		if o > idem.OrderClaimFirst {
			return fmt.Errorf("WithReserveOrder: give idem.OrderAdaptive, idem.OrderReadFirst or idem.OrderClaimFirst (got %d)", o)
		}
		c.order = o
		return nil
	}
}
