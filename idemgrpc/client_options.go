package idemgrpc

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of UnaryClientInterceptor, as package client's for HTTP.
const (
	DefaultAttempts       = 5
	DefaultAttemptTimeout = 15 * time.Second
	DefaultDeadline       = time.Minute
	DefaultBackoff        = 250 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

// ClientAttempt is what WithAttemptHook is told before each attempt of a
// call.
type ClientAttempt struct {
	FullMethod string
	Key        string        // the call's idempotency key
	Number     int           // 1 for the first attempt
	Wait       time.Duration // the wait before this attempt
	Cause      error         // why the previous attempt is retried; nil for the first
}

type clientConfig struct {
	attempts       int
	attemptTimeout time.Duration
	deadline       time.Duration
	retention      time.Duration
	backoff, cap   time.Duration
	onAttempt      func(ClientAttempt)
}

func clientDefaults() clientConfig {
	return clientConfig{attempts: DefaultAttempts, attemptTimeout: DefaultAttemptTimeout, deadline: DefaultDeadline,
		backoff: DefaultBackoff, cap: DefaultMaxBackoff}
}

// WithAttempts sets how many times UnaryClientInterceptor sends one call
// at most, the first included. Default DefaultAttempts (5); 1 turns retries
// off, less is an error. The server interceptor ignores it.
func WithAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithAttempts: give 1 or more (got %d)", n)
		}
		c.cl.attempts = n
		return nil
	}
}

// WithAttemptTimeout bounds one attempt of a call of UnaryClientInterceptor;
// an attempt over it is abandoned and retried with the same key. Default
// DefaultAttemptTimeout (15 s), above the server's default wait for a call
// in flight (10 s). 0 or less is an error. The server interceptor ignores
// it.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithAttemptTimeout: give a positive duration (got %v)", d)
		}
		c.cl.attemptTimeout = d
		return nil
	}
}

// WithDeadline bounds one call of UnaryClientInterceptor, every attempt and
// wait included (the call's own deadline, when sooner, wins). Default
// DefaultDeadline (1 min); it must stay below the server's retention
// (WithRetention). 0 or less is an error. The server interceptor ignores
// it.
func WithDeadline(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithDeadline: give a positive duration (got %v)", d)
		}
		c.cl.deadline = d
		return nil
	}
}

// WithRetention tells UnaryClientInterceptor the server's retention
// (tiered.WithRetention): a deadline that is not below it is refused.
// Default: not told, not checked. 0 or less is an error. The server
// interceptor ignores it.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRetention: give the server's positive retention (got %v)", d)
		}
		c.cl.retention = d
		return nil
	}
}

// WithBackoff sets UnaryClientInterceptor's wait before a retry whose
// status carries no RetryInfo: random in [0, min(max, base·2^(retry−1))].
// Defaults DefaultBackoff (250 ms) and DefaultMaxBackoff (5 s); base must
// be positive and max at least base. The server interceptor ignores it.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) error {
		if base <= 0 || max < base {
			return fmt.Errorf("WithBackoff: give a positive base and a max of at least base (got %v, %v)", base, max)
		}
		c.cl.backoff, c.cl.cap = base, max
		return nil
	}
}

// WithAttemptHook sets a function UnaryClientInterceptor calls before each
// attempt, on the caller's goroutine: count retries with it. Default none;
// nil is an error. The server interceptor ignores it.
func WithAttemptHook(fn func(ClientAttempt)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithAttemptHook: give a function (got nil)")
		}
		c.cl.onAttempt = fn
		return nil
	}
}
