package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemkit/idem"
)

// Transport is an http.RoundTripper that sends each request of a guarded
// method with one idempotency key and retries it with that key (see the
// package documentation for the table). Build it with New; it is safe for
// concurrent use.
type Transport struct {
	base http.RoundTripper
	c    config
}

var _ http.RoundTripper = (*Transport)(nil)

// Attempt is what WithAttemptHook is told before each attempt.
type Attempt struct {
	// Request is the operation's request, as the caller gave it.
	Request *http.Request
	// Key is the operation's idempotency key, "" for a request without one.
	Key string
	// Number is the attempt's number, 1 for the first.
	Number int
	// Wait is how long the Transport waited before this attempt.
	Wait time.Duration
	// Cause is why the previous attempt is retried (nil for the first): a
	// connection error, ErrAttemptTimeout, or an error wrapping
	// ErrRetryStatus (and the answer's *Problem when it was idem's).
	Cause error
}

// New returns a Transport that sends through base (http.DefaultTransport
// when nil). An option given nonsense, or a deadline that is not below the
// retention given (WithRetention), is an error wrapping idem.ErrConfig.
func New(base http.RoundTripper, opts ...Option) (*Transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := defaults()
	var errs []error
	for _, o := range opts {
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if c.retention > 0 && c.deadline >= c.retention {
		errs = append(errs, fmt.Errorf("WithDeadline: give a deadline below the server's retention %v (got %v): a retry after the record expired runs the operation again", c.retention, c.deadline))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: client: %w", idem.ErrConfig, err)
	}
	return &Transport{base: base, c: c}, nil
}

// NewClient returns a copy of c (a new one when nil) whose Transport is a
// Transport over c's own (http.DefaultTransport when nil). c.Timeout, when
// set, bounds the whole operation, retries included: keep it 0, or above
// WithDeadline.
func NewClient(c *http.Client, opts ...Option) (*http.Client, error) {
	var out http.Client
	if c != nil {
		out = *c
	}
	t, err := New(out.Transport, opts...)
	if err != nil {
		return nil, err
	}
	out.Transport = t
	return &out, nil
}

// RoundTrip sends req, and sends it again with the same key while the
// answer says a retry can help and the attempts and the deadline allow. It
// returns the last answer, or the last error. req is not modified.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op, err := t.prepare(req)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.run(op)
}

// operation is one request with everything its attempts share.
type operation struct {
	req      *http.Request
	ctx      context.Context // req's, with the outcome
	out      Outcome
	header   http.Header // req's, with the key
	body     bodySource
	retries  bool // a retry is harmless: a key, or an idempotent method
	deadline time.Time
}

func (t *Transport) run(op *operation) (*http.Response, error) {
	c := &t.c
	var (
		wait  time.Duration
		cause error
	)
	for n := 1; ; n++ {
		if n > 1 {
			if err := sleep(op.ctx, wait); err != nil {
				return nil, fmt.Errorf("client: %w (after %d attempts, the last retried for: %w)", err, n-1, cause)
			}
		}
		op.out.Attempts = n
		if c.onAttempt != nil {
			c.onAttempt(Attempt{Request: op.req, Key: op.out.Key, Number: n, Wait: wait, Cause: cause})
		}
		resp, err := t.attempt(op, n)
		last := n >= c.attempts || !op.retries
		switch {
		case err != nil:
			if last || !retryableErr(op.ctx, err) {
				return nil, err
			}
			wait, cause = c.backoffFor(n), err
		default:
			var p *Problem
			if resp.StatusCode >= 400 {
				p = problemOf(resp)
			}
			if last || judgeStatus(resp, p) == done {
				return t.deliver(op, resp), nil
			}
			wait = c.backoffFor(n)
			if ra, ok := retryAfter(resp.Header, time.Now()); ok {
				wait = ra + c.backoffFor(1)/4
			}
			if time.Now().Add(wait).After(op.deadline) {
				return t.deliver(op, resp), nil // no retry can start in time
			}
			cause = fmt.Errorf("%w: status %d", ErrRetryStatus, resp.StatusCode)
			if p != nil {
				cause = fmt.Errorf("%w: %w", ErrRetryStatus, p)
			}
			discard(resp)
		}
		if time.Now().Add(wait).After(op.deadline) {
			return nil, fmt.Errorf("client: no time left before the deadline for attempt %d: %w", n+1, cause)
		}
	}
}

// deliver hands resp to the caller: the attempt's context ends when its
// body is closed or read to its end.
func (t *Transport) deliver(op *operation, resp *http.Response) *http.Response {
	if t.c.marker != "" {
		op.out.Replayed = resp.Header.Get(t.c.marker) == "true"
	}
	return resp
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-tm.C:
		return nil
	}
}
