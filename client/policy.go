package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Causes of a retry, as Attempt.Cause reports them; each is checked with
// errors.Is. The cause of a retry after a connection error is that error.
var (
	// ErrAttemptTimeout: the attempt had no answer within
	// WithAttemptTimeout.
	ErrAttemptTimeout = errors.New("client: attempt timed out")
	// ErrRetryStatus: the answer's status says "try again" (408, 409 in
	// flight, 425, 429, 502, 503, 504, or a server's Should-Retry: true);
	// the cause wraps it together with the *Problem when the answer was one
	// of idem's.
	ErrRetryStatus = errors.New("client: answer says retry")
)

// idempotent reports whether method is idempotent by definition (RFC 9110
// §9.2.2), so that a retry without a key is harmless.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// verdict is what one answer means for the operation.
type verdict uint8

const (
	done  verdict = iota // give the answer to the caller
	retry                // send again, after the wait
)

// judgeStatus is the retry table for an answer: retry what says "try
// again", give the caller everything else. A server's explicit
// Should-Retry header wins over the status; an idem problem wins over a
// bare 409 (a conflict of the application is not retried).
func judgeStatus(resp *http.Response, p *Problem) verdict {
	switch shouldRetry(resp.Header) {
	case "false":
		return done
	case "true":
		return retry
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retry
	case http.StatusConflict:
		if p != nil && p.Code == CodeInFlight {
			return retry
		}
	}
	return done
}

// shouldRetry returns a server's "true" or "false", or "".
func shouldRetry(h http.Header) string {
	v := h.Get(ShouldRetryHeader)
	if v == "" {
		v = h.Get(StripeShouldRetryHeader)
	}
	return strings.ToLower(strings.TrimSpace(v))
}

// retryableErr reports whether an error of the base RoundTripper may be
// retried: every connection error may, since the request may not have been
// answered; a certificate the client refuses, and the caller's own
// context's end, may not.
func retryableErr(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &hostname), errors.As(err, &verify):
		return false
	}
	return true
}

// retryAfter reads Retry-After (delay-seconds or an HTTP-date) as a wait
// from now; ok is false when there is none or it cannot be read.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff returns the wait before retry n (1 for the first retry): a
// random duration in [0, min(cap, base·2^(n−1))] (full jitter).
func (c *config) backoffFor(n int) time.Duration {
	d := c.backoff
	for i := 1; i < n && d < c.cap; i++ {
		d *= 2
	}
	d = min(d, c.cap)
	return rand.N(d + 1)
}
