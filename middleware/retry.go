package middleware

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
)

// DefaultShouldRetryHeader is the header by which every problem the
// middleware writes says whether a retry with the same key can help:
// "true" (in flight, unavailable) or "false" (a malformed or missing key,
// a body the server refuses, a key reused with another payload, an answer
// that was not stored). A ProblemFailed carries none: a retry runs the
// handler again, which may or may not fail again. Package
// github.com/idemkit/idem/client reads it, as it reads Stripe's
// Stripe-Should-Retry.
const DefaultShouldRetryHeader = "Idempotency-Should-Retry"

// WithShouldRetryHeader names the header that tells, on every problem,
// whether a retry can help (see DefaultShouldRetryHeader, the default).
// "" turns it off; a name that is not a header name is an error.
// Retry-After is set on the problems a retry can cure either way.
func WithShouldRetryHeader(name string) Option {
	return func(c *config) error {
		switch {
		case name == "":
			c.shouldRetry = ""
		case !validToken(name):
			return fmt.Errorf("WithShouldRetryHeader: give a header name, or \"\" for none (got %q)", name)
		default:
			c.shouldRetry = textproto.CanonicalMIMEHeaderKey(name)
		}
		return nil
	}
}

// ShouldRetry reports whether a client that retries the request with the
// same key can get another answer than p: true for ProblemInFlight and
// ProblemUnavailable, false for the problems no retry cures. known is
// false for ProblemFailed, for a Type that is not one of the Problem
// constants, and for a ProblemNotReplayable whose Status is its
// OriginalStatus: the answer of a request that shared a failed execution,
// whose key was released, so that a retry runs the handler again.
func (p Problem) ShouldRetry() (retry, known bool) {
	switch p.Type {
	case ProblemInFlight, ProblemUnavailable:
		return true, true
	case ProblemNotReplayable:
		return false, p.Status != p.OriginalStatus
	case ProblemKeyMissing, ProblemKeyMalformed, ProblemBodyInvalid, ProblemBodyTooLarge, ProblemMismatch, ProblemScopeMissing:
		return false, true
	}
	return false, false
}

// Code returns p's short name, as WriteStripeError writes it in
// error.code: "key_missing", "key_malformed", "body_invalid",
// "body_too_large", "in_flight", "mismatch", "unavailable",
// "not_replayable", "scope_missing" or "failed" ("" for a Type that is not
// one of the Problem constants).
func (p Problem) Code() string { return problemCodes[p.Type] }

// problemCodes maps each Problem* type to its short name, the one the
// answer observer hears (problemNames).
var problemCodes = func() map[string]string {
	m := make(map[string]string, len(problems))
	for i := range problems {
		m[problems[i].typ] = problemNames[i]
	}
	return m
}()

// signalRetry sets the should-retry header of p on hdr, when configured
// and known.
func (h *Handler) signalRetry(hdr http.Header, p Problem) {
	if h.c.shouldRetry == "" {
		return
	}
	if retry, known := p.ShouldRetry(); known {
		hdr[h.c.shouldRetry] = []string{strconv.FormatBool(retry)}
	}
}

// WriteStripeError is an ErrorWriter for services whose clients parse
// Stripe's errors (stripe-go and Stripe's other SDKs among them): p as
// application/json {"error":{"type","code","message","doc_url"}}, with
// Stripe-Should-Retry where p.ShouldRetry knows, Content-Length and
// Cache-Control: no-store. error.type is "idempotency_error" for a key in
// flight, reused or not replayable, "api_error" for ProblemUnavailable and
// ProblemFailed, and "invalid_request_error" for the rest; error.code is
// p.Code(); doc_url is p.Type. Without both the Stripe body and the header,
// stripe-go retries every answer it cannot parse, 422 included. Use it with
// WithErrorWriter.
func WriteStripeError(w http.ResponseWriter, _ *http.Request, p Problem) {
	typ := "invalid_request_error"
	switch p.Type {
	case ProblemInFlight, ProblemMismatch, ProblemNotReplayable:
		typ = "idempotency_error"
	case ProblemUnavailable, ProblemFailed:
		typ = "api_error"
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	type stripeErr struct {
		Type    string `json:"type"`
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
		DocURL  string `json:"doc_url,omitempty"`
	}
	b, err := json.Marshal(struct {
		Error stripeErr `json:"error"`
	}{stripeErr{Type: typ, Code: p.Code(), Message: msg, DocURL: p.Type}})
	if err != nil { // unreachable: every field is a string
		b = []byte(`{"error":{"type":"api_error","message":"error"}}`)
	}
	h := w.Header()
	h.Del("Content-Encoding")
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	h["Cache-Control"] = []string{"no-store"}
	if retry, known := p.ShouldRetry(); known {
		h["Stripe-Should-Retry"] = []string{strconv.FormatBool(retry)}
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}
