package idem

import (
	"errors"
	"strings"
)

// The sentinel errors of idem. Layers translate driver errors into these at
// their boundary, so callers classify errors with errors.Is and never import a
// driver. Errors are wrapped with %w and may carry detail.
var (
	// ErrInFlight reports that another owner is still working on the key and
	// its result did not arrive within the wait. Retry later (HTTP 409).
	ErrInFlight = errors.New("idem: request in flight")

	// ErrMismatch reports that the key is already bound to a request with
	// another fingerprint: the client reused a key for a different request
	// (HTTP 422). It is never a replay.
	ErrMismatch = errors.New("idem: key reused with a different request")

	// ErrLeaseLost reports that the caller's token no longer owns the key: the
	// lease expired and another owner took over, the record was released or
	// completed, or it expired. Nothing was changed.
	ErrLeaseLost = errors.New("idem: lease lost")

	// ErrNotFound reports that no live record exists for the key.
	ErrNotFound = errors.New("idem: not found")

	// ErrUnavailable reports that a store that had to decide could not be
	// reached or did not answer in time. idem fails closed: the work does not
	// run (HTTP 503).
	ErrUnavailable = errors.New("idem: store unavailable")

	// ErrConfig reports a mistake in setting idem up, which no retry fixes: a
	// table that does not exist (run the layer's Init, or apply its DDL), an
	// unknown database, failed authentication, a missing client, an option
	// given nonsense (the errors of tiered.New, of the layers' New and of
	// the middleware's constructors wrap it). Unlike
	// ErrUnavailable it is not an outage: the message says what to change.
	// The middleware answers it as a server error (500), never as "retry
	// later".
	ErrConfig = errors.New("idem: configuration error")

	// ErrTooLarge reports a result larger than a layer accepts.
	ErrTooLarge = errors.New("idem: result too large")

	// ErrClosed reports a Store or a layer used after its Close: a call to
	// a closed tiered.Store, work the Store's Close cancelled (the cause of
	// its context), or a redislayer Wait ended by the layer's Close (which
	// also wraps ErrUnavailable, as any Wait that cannot go on does).
	ErrClosed = errors.New("idem: closed")
)

// NestedConfigError states err, the refusal of a constructor that an option
// of another package calls (fingerprint.New under an integration's
// WithFingerprint), as a fault of that option: "WithFingerprint:
// fingerprint: WithAllow: give …", without ErrConfig's text in the middle,
// since the outer constructor's own refusal says it once. errors.Is and
// errors.As still find everything err wraps (ErrConfig,
// fingerprint.ErrInvalidPath). An err whose text does not start with
// ErrConfig's is kept as it reads: "option: err".
func NestedConfigError(option string, err error) error {
	return &nestedConfigError{option: option, err: err}
}

type nestedConfigError struct {
	option string
	err    error
}

func (e *nestedConfigError) Error() string {
	return e.option + ": " + strings.TrimPrefix(e.err.Error(), ErrConfig.Error()+": ")
}

func (e *nestedConfigError) Unwrap() error { return e.err }
