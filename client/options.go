package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"time"
)

// Defaults of a Transport.
const (
	// DefaultKeyHeader is the request header that carries the key.
	DefaultKeyHeader = "Idempotency-Key"
	// DefaultAttempts is how many times one operation is sent at most.
	DefaultAttempts = 5
	// DefaultAttemptTimeout bounds one attempt, until the response's
	// headers arrive. It is above the server's default wait for a request
	// in flight (10 s), so that a retry that finds the first attempt still
	// running receives its answer rather than timing out.
	DefaultAttemptTimeout = 15 * time.Second
	// DefaultDeadline bounds one operation, every attempt and wait
	// included.
	DefaultDeadline = time.Minute
	// DefaultBackoff is the first retry's mean wait; each retry doubles it.
	DefaultBackoff = 250 * time.Millisecond
	// DefaultMaxBackoff caps the doubled wait before jitter.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultBodyLimit is the largest body read into memory to be sent
	// again (1 MiB), for a request without GetBody.
	DefaultBodyLimit = 1 << 20
	// ShouldRetryHeader is the answer header by which an idem server says
	// whether a retry can help ("true" or "false"); Stripe's API and
	// middleware.WriteStripeError send StripeShouldRetryHeader instead.
	ShouldRetryHeader = "Idempotency-Should-Retry"
	// StripeShouldRetryHeader is Stripe's header of the same meaning.
	StripeShouldRetryHeader = "Stripe-Should-Retry"
)

// Option configures a Transport. Options apply in order over the defaults;
// one given nonsense makes New fail with an error naming the option.
type Option func(*config) error

type config struct {
	keyHeader      string
	methods        []string
	attempts       int
	attemptTimeout time.Duration
	deadline       time.Duration
	retention      time.Duration // 0: not told
	backoff, cap   time.Duration
	bodyLimit      int64
	marker         string
	onAttempt      func(Attempt)
}

func defaults() config {
	return config{
		keyHeader:      DefaultKeyHeader,
		methods:        []string{http.MethodPost, http.MethodPatch},
		attempts:       DefaultAttempts,
		attemptTimeout: DefaultAttemptTimeout,
		deadline:       DefaultDeadline,
		backoff:        DefaultBackoff,
		cap:            DefaultMaxBackoff,
		bodyLimit:      DefaultBodyLimit,
	}
}

// WithKeyHeader sets the request header that carries the key. Default
// DefaultKeyHeader. A name that is not a header name is an error.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if !token(name) {
			return fmt.Errorf("WithKeyHeader: give a header name (got %q)", name)
		}
		c.keyHeader = textproto.CanonicalMIMEHeaderKey(name)
		return nil
	}
}

// WithMethods sets the methods whose requests get a key, compared exactly.
// Default POST and PATCH, the methods an idem server guards by default.
// Give the server's list (middleware.WithMethods). No methods means none
// gets a key minted (a caller's key is still sent); a name that is not a
// method token is an error.
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		for _, m := range methods {
			if !token(m) {
				return fmt.Errorf("WithMethods: give method names (got %q)", m)
			}
		}
		c.methods = append([]string(nil), methods...)
		return nil
	}
}

// WithAttempts sets how many times one operation is sent at most, the
// first included. Default DefaultAttempts (5). 1 turns retries off; less is
// an error.
func WithAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithAttempts: give 1 or more (got %d)", n)
		}
		c.attempts = n
		return nil
	}
}

// WithAttemptTimeout bounds one attempt until its response's headers
// arrive; an attempt over it is abandoned and retried with the same key.
// Default DefaultAttemptTimeout (15 s). Keep it above the server's wait for
// a request in flight (tiered.WithWait, 10 s by default). Reading the body
// of the answer returned is bounded by the request's context only. 0 or
// less is an error.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithAttemptTimeout: give a positive duration (got %v)", d)
		}
		c.attemptTimeout = d
		return nil
	}
}

// WithDeadline bounds one operation, every attempt and wait included: no
// attempt starts after it, and no wait is begun that would end after it.
// Default DefaultDeadline (1 min). It must stay below the server's
// retention (WithRetention). 0 or less is an error.
func WithDeadline(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithDeadline: give a positive duration (got %v)", d)
		}
		c.deadline = d
		return nil
	}
}

// WithRetention tells the Transport how long the server keeps an answer
// (tiered.WithRetention, 24 h by default). New refuses a deadline that is
// not below it: a retry after the record expired runs the operation again.
// Default: not told, not checked. 0 or less is an error.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRetention: give the server's positive retention (got %v)", d)
		}
		c.retention = d
		return nil
	}
}

// WithBackoff sets the wait before a retry that no Retry-After names: a
// random duration between 0 and base·2^(retry−1), capped at max (full
// jitter). Defaults DefaultBackoff (250 ms) and DefaultMaxBackoff (5 s).
// base must be positive and max at least base.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) error {
		if base <= 0 || max < base {
			return fmt.Errorf("WithBackoff: give a positive base and a max of at least base (got %v, %v)", base, max)
		}
		c.backoff, c.cap = base, max
		return nil
	}
}

// WithBodyLimit sets the largest body of a request without GetBody that is
// read into memory to be sent again. Default DefaultBodyLimit (1 MiB). A
// larger one fails with ErrBodyTooLarge before anything is sent; a request
// with GetBody is never buffered. 0 or less is an error.
func WithBodyLimit(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("WithBodyLimit: give a positive number of bytes (got %d)", n)
		}
		c.bodyLimit = n
		return nil
	}
}

// WithReplayMarker names the answer header by which the server marks a
// replay (middleware.WithReplayMarker), for Outcome.Replayed. Default none:
// an idem server marks no replay unless told to. A name that is not a
// header name is an error.
func WithReplayMarker(name string) Option {
	return func(c *config) error {
		if !token(name) {
			return fmt.Errorf("WithReplayMarker: give a header name (got %q)", name)
		}
		c.marker = textproto.CanonicalMIMEHeaderKey(name)
		return nil
	}
}

// WithAttemptHook sets a function called before each attempt is sent, the
// first included, with its number, the wait before it and the cause of the
// retry: count retries with it. It runs on the caller's goroutine and must
// not block. Default none; nil is an error.
func WithAttemptHook(fn func(Attempt)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithAttemptHook: give a function (got nil)")
		}
		c.onAttempt = fn
		return nil
	}
}

// token reports whether s is an HTTP token (RFC 9110): a header or method
// name.
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c < 0x80 && c > 0x20 && !isSeparator(c):
		default:
			return false
		}
	}
	return true
}

func isSeparator(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '@', ',', ';', ':', '\\', '"', '/', '[', ']', '?', '=', '{', '}', 0x7f:
		return true
	}
	return false
}
