package middleware

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Problem types: the "type" member of every problem the middleware writes.
// Each is the address of its own documentation.
const (
	// ProblemKeyMissing: the key is required (WithRequire) and the request
	// has none. Default status 400.
	ProblemKeyMissing = problemBase + "ProblemKeyMissing"
	// ProblemKeyMalformed: the key header is not one well-formed key (see
	// ParseKeyHeader). Default status 400.
	ProblemKeyMalformed = problemBase + "ProblemKeyMalformed"
	// ProblemBodyInvalid: the body cannot be read or the fingerprint
	// rejects it (broken JSON, duplicate members, …). Default status 400.
	ProblemBodyInvalid = problemBase + "ProblemBodyInvalid"
	// ProblemBodyTooLarge: the body is over the limit (WithBodyLimit).
	// Nothing was claimed. Default status 413.
	ProblemBodyTooLarge = problemBase + "ProblemBodyTooLarge"
	// ProblemInFlight: a request with this key is still running and did not
	// finish within the Store's wait. Retry after Retry-After. Default
	// status 409.
	ProblemInFlight = problemBase + "ProblemInFlight"
	// ProblemMismatch: the key was used for a different request (another
	// body, route or method). Default status 422.
	ProblemMismatch = problemBase + "ProblemMismatch"
	// ProblemUnavailable: the store cannot decide; the handler did not run.
	// Retry after Retry-After. Default status 503.
	ProblemUnavailable = problemBase + "ProblemUnavailable"
	// ProblemNotReplayable: the request with this key was executed, but its
	// response was streamed, hijacked or over the response limit, so it was
	// not stored and cannot be repeated (the tombstone). original_status
	// holds the status it had. Retrying does not help. Default status 409.
	ProblemNotReplayable = problemBase + "ProblemNotReplayable"
	// ProblemScopeMissing: the request names no principal (the WithScope
	// function returned ""), so its key cannot be bound to one; nothing was
	// claimed. Default status 401.
	ProblemScopeMissing = problemBase + "ProblemScopeMissing"
	// ProblemFailed: the handler panicked, the stored response is
	// unreadable, or the middleware is misconfigured. Default status 500.
	ProblemFailed = problemBase + "ProblemFailed"
)

const problemBase = "https://pkg.go.dev/github.com/idemkit/idem/middleware#"

// Problem is an RFC 9457 problem detail, as the middleware answers.
type Problem struct {
	// Type is one of the Problem* constants.
	Type string `json:"type"`
	// Title is a short, fixed summary of Type.
	Title string `json:"title"`
	// Status is the HTTP status, as configured by WithStatuses.
	Status int `json:"status"`
	// Detail explains this occurrence. It never repeats the key and never
	// carries a store's error text.
	Detail string `json:"detail,omitempty"`
	// OriginalStatus is, for ProblemNotReplayable, the status of the
	// response that could not be stored (0 when the connection was
	// hijacked).
	OriginalStatus int `json:"original_status,omitempty"`
	// Err is the cause, for logging by a custom ErrorWriter (a
	// *tiered.PanicError carries the panic's stack). It is not written.
	Err error `json:"-"`
}

// ErrorWriter writes p as the response to r. The middleware has already set
// Retry-After (ProblemInFlight, ProblemUnavailable), the should-retry
// header (WithShouldRetryHeader) and the replay marker
// (ProblemNotReplayable) on w's header. It must write the whole response.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, p Problem)

// WriteProblem is the default ErrorWriter: p as application/problem+json
// (RFC 9457) with its status, Content-Length and Cache-Control: no-store.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p Problem) {
	b, err := json.Marshal(p)
	if err != nil { // unreachable: every field marshals
		b = []byte(`{"type":"about:blank"}`)
	}
	h := w.Header()
	h.Del("Content-Encoding")
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// Statuses are the status codes of the answers the middleware gives itself.
// A zero field keeps its default (see WithStatuses); any other must be in
// 200–599.
type Statuses struct {
	KeyMissing    int // no key and WithRequire: 400
	KeyMalformed  int // a malformed key: 400
	BodyInvalid   int // an unreadable body, or one the fingerprint rejects: 400
	BodyTooLarge  int // a body over WithBodyLimit: 413
	InFlight      int // still running after the Store's wait: 409
	Mismatch      int // the key is bound to another request: 422
	Unavailable   int // the store cannot decide: 503
	NotReplayable int // a tombstone (streamed, hijacked or oversized): 409
	ScopeMissing  int // a request that names no principal (WithScope gave ""): 401
	Failed        int // a panic, an unreadable record, misconfiguration: 500
}

// DefaultStatuses returns the default codes, those of the IETF draft on the
// Idempotency-Key header where it names one.
func DefaultStatuses() Statuses {
	var s Statuses
	for i := range problems {
		*problems[i].status(&s) = problems[i].def
	}
	return s
}

// merge returns s with every zero field taken from d.
func (s Statuses) merge(d Statuses) Statuses {
	for i := range problems {
		if v := problems[i].status(&s); *v == 0 {
			*v = *problems[i].status(&d)
		}
	}
	return s
}

// validate reports each field of s that is neither zero nor a status of
// 200–599, by its name.
func (s Statuses) validate() error {
	var errs []error
	seen := map[*int]bool{}
	for i := range problems {
		v := problems[i].status(&s)
		if seen[v] {
			continue // two problems share the field
		}
		seen[v] = true
		if *v != 0 && (*v < 200 || *v > 599) {
			name := strings.TrimPrefix(problems[i].typ, problemBase+"Problem")
			errs = append(errs, fmt.Errorf("WithStatuses: give %s a status of 200–599, or 0 for the default (got %d)", name, *v))
		}
	}
	return errors.Join(errs...)
}
