package tiered

import (
	"errors"

	"github.com/idemkit/idem"
)

// Verdict is how a caller of Do should answer its own client, decided from
// Do's error alone: the one place where every front end (the HTTP
// middleware, the gRPC interceptor, a consumer) learns what an error means
// for the answer, so that they never disagree.
type Verdict uint8

const (
	// VerdictResult: Do returned the key's result (err is nil), or the
	// result of the execution a caller shared.
	VerdictResult Verdict = iota
	// VerdictFailed: the work ran and failed or committed nothing (its own
	// error, a panic, runtime.Goexit, a transaction that did not commit, a
	// setup mistake): the key was released and a retry runs the work again.
	// HTTP 500, gRPC Internal (or the handler's own status).
	VerdictFailed
	// VerdictInFlight: another owner holds the key (still working after
	// the wait, or it took over from this one, whose lease lapsed): a
	// retry later gets that owner's answer. HTTP 409 + Retry-After, gRPC
	// Aborted.
	VerdictInFlight
	// VerdictMismatch: the key is bound to another request. HTTP 422, gRPC
	// FailedPrecondition.
	VerdictMismatch
	// VerdictPending: the work ran, but its result is not stored yet (the
	// deciding tier is out); a retry later gets it. HTTP 503 + Retry-After,
	// gRPC Unavailable.
	VerdictPending
	// VerdictUnavailable: no tier could decide, or the Store is closing;
	// the work did not run. HTTP 503 + Retry-After, gRPC Unavailable.
	VerdictUnavailable
	// VerdictNotReplayable: the work ran once; its result cannot be
	// repeated (too large to keep). HTTP 409, gRPC FailedPrecondition.
	VerdictNotReplayable
	// VerdictInvalid: the call itself was invalid (a zero key, a nil
	// function): a bug of the caller's. HTTP 500, gRPC Internal.
	VerdictInvalid
)

var verdictNames = [...]string{"result", "failed", "in_flight", "mismatch", "pending", "unavailable", "not_replayable", "invalid"}

// String returns the verdict's snake_case name.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Judge returns the verdict for a call of Do that returned err. The order
// of the cases is the decision: a more specific error is looked at first
// (ErrPending wraps idem.ErrUnavailable, an ErrNotCommitted may wrap fn's
// own error).
func Judge(err error) Verdict {
	var pe *PanicError
	switch {
	case err == nil:
		return VerdictResult
	case errors.As(err, &pe), errors.Is(err, ErrNotCommitted), errors.Is(err, idem.ErrConfig):
		return VerdictFailed
	case errors.Is(err, idem.ErrMismatch):
		return VerdictMismatch
	case errors.Is(err, idem.ErrInFlight), errors.Is(err, idem.ErrLeaseLost):
		return VerdictInFlight
	case errors.Is(err, ErrNotReplayable):
		return VerdictNotReplayable
	case errors.Is(err, ErrPending):
		return VerdictPending
	case errors.Is(err, idem.ErrUnavailable), errors.Is(err, idem.ErrClosed):
		return VerdictUnavailable
	case errors.Is(err, idem.ErrInvalidKey), errors.Is(err, errNilFunc):
		return VerdictInvalid
	}
	return VerdictFailed
}
