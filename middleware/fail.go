package middleware

import (
	"errors"
	"net/http"
	"strings"

	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/tiered"
)

// problemKind names one of the middleware's own answers: an index into
// problems.
type problemKind uint8

const (
	problemKeyMissing problemKind = iota
	problemKeyMalformed
	problemBodyInvalid
	problemBodyTooLarge
	problemInFlight
	problemMismatch
	problemUnavailable
	problemPending
	problemNotReplayable
	problemScopeMissing
	problemFailed
)

// problemSpec is everything about one kind of answer: adding a problem is
// one row here (and, for a new status, a field of Statuses).
type problemSpec struct {
	typ, title string
	// detail is the fixed explanation; with fromErr the error's own text
	// (which describes the client's input) replaces it.
	detail  string
	fromErr bool
	// status is the field of Statuses that sets the answer's status, and
	// def its default.
	status func(*Statuses) *int
	def    int
	// retry is the index of the Retry-After value in config.retryAfter, or
	// -1 for none.
	retry int
}

var problems = [...]problemSpec{
	problemKeyMissing: {ProblemKeyMissing, "Idempotency key missing", "This request must carry an idempotency key.", false,
		func(s *Statuses) *int { return &s.KeyMissing }, http.StatusBadRequest, -1},
	problemKeyMalformed: {ProblemKeyMalformed, "Idempotency key malformed", "", true,
		func(s *Statuses) *int { return &s.KeyMalformed }, http.StatusBadRequest, -1},
	problemBodyInvalid: {ProblemBodyInvalid, "Request body invalid", "", true,
		func(s *Statuses) *int { return &s.BodyInvalid }, http.StatusBadRequest, -1},
	problemBodyTooLarge: {ProblemBodyTooLarge, "Request body too large", "", true,
		func(s *Statuses) *int { return &s.BodyTooLarge }, http.StatusRequestEntityTooLarge, -1},
	problemInFlight: {ProblemInFlight, "Request in flight", "A request with this idempotency key is still being processed; retry later.", false,
		func(s *Statuses) *int { return &s.InFlight }, http.StatusConflict, 0},
	problemMismatch: {ProblemMismatch, "Idempotency key reused", "This idempotency key was used for a different request.", false,
		func(s *Statuses) *int { return &s.Mismatch }, http.StatusUnprocessableEntity, -1},
	problemUnavailable: {ProblemUnavailable, "Idempotency store unavailable", "The request was not processed; retry later.", false,
		func(s *Statuses) *int { return &s.Unavailable }, http.StatusServiceUnavailable, 1},
	problemPending: {ProblemUnavailable, "Idempotency store unavailable", "The request was processed, but its response could not be stored yet; retry later to receive it.", false,
		func(s *Statuses) *int { return &s.Unavailable }, http.StatusServiceUnavailable, 1},
	problemNotReplayable: {ProblemNotReplayable, "Response not replayable", "The request with this idempotency key was processed, but its response was streamed or too large to be stored.", false,
		func(s *Statuses) *int { return &s.NotReplayable }, http.StatusConflict, -1},
	problemScopeMissing: {ProblemScopeMissing, "Caller unknown", "This request names no caller that its idempotency key could be bound to.", false,
		func(s *Statuses) *int { return &s.ScopeMissing }, http.StatusUnauthorized, -1},
	problemFailed: {ProblemFailed, "Request failed", "The request could not be completed.", false,
		func(s *Statuses) *int { return &s.Failed }, http.StatusInternalServerError, -1},
}

func (h *Handler) status(k problemKind) int { return *problems[k].status(&h.c.statuses) }

// fail answers the problem k caused by err.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, k problemKind, err error) {
	h.write(w, r, k, h.status(k), 0, err)
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, k problemKind, status, original int, err error) {
	spec := &problems[k]
	p := Problem{Type: spec.typ, Title: spec.title, Status: status, Detail: spec.detail, OriginalStatus: original, Err: err}
	if spec.fromErr && err != nil {
		// Our own and the fingerprint's messages describe the input, never
		// echo the key, and carry no infrastructure detail.
		p.Detail = clientText(err)
	}
	if spec.retry >= 0 {
		w.Header()["Retry-After"] = []string{h.c.retryAfter[spec.retry]}
	}
	h.signalRetry(w.Header(), p)
	h.c.errWriter(w, r, p)
	h.answered(r, AnswerProblem, status, k)
}

// clientText turns an error about the client's input into a sentence for
// the client: without the Go package prefixes of the error chain
// ("middleware: ", "fingerprint: "), capitalised, ending with a period.
func clientText(err error) string {
	s := err.Error()
	for _, prefix := range [...]string{"middleware: ", "fingerprint: ", "idem: "} {
		s = strings.ReplaceAll(s, prefix, "")
	}
	if s == "" {
		return s
	}
	if c := s[0]; 'a' <= c && c <= 'z' {
		s = string(c-'a'+'A') + s[1:]
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// fingerprintProblem classifies an error of Builder.RequestBody.
func fingerprintProblem(err error) problemKind {
	switch {
	case errors.Is(err, fingerprint.ErrBodyTooLarge):
		return problemBodyTooLarge
	case errors.Is(err, fingerprint.ErrInvalidJSON), errors.Is(err, fingerprint.ErrDuplicateMember),
		errors.Is(err, fingerprint.ErrAmbiguousMember),
		errors.Is(err, fingerprint.ErrNumberRange), errors.Is(err, fingerprint.ErrInvalidString),
		errors.Is(err, fingerprint.ErrTooDeep):
		return problemBodyInvalid
	}
	return problemFailed // none other is expected: a server error rather than blame the client
}

// storeProblem classifies an error of Store.Do that came without a
// response, through tiered.Judge: the one decision every front end shares.
// Lease lost is in flight: the work ran here, but another owner took the
// key over, and a retry gets that owner's answer. A setup mistake on the
// server is a plain failure: no retry helps, and its details are the
// operator's, not the client's.
func storeProblem(err error) problemKind {
	switch tiered.Judge(err) {
	case tiered.VerdictMismatch:
		return problemMismatch
	case tiered.VerdictInFlight:
		return problemInFlight
	case tiered.VerdictPending:
		return problemPending
	case tiered.VerdictUnavailable:
		return problemUnavailable
	case tiered.VerdictNotReplayable:
		return problemNotReplayable
	}
	return problemFailed
}
