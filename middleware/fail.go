package middleware

import (
	"errors"
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/tiered"
)

// problemKind names one of the middleware's own answers.
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
	problemFailed
)

var problemTypes = [...]struct{ typ, title, detail string }{
	problemKeyMissing:    {ProblemKeyMissing, "Idempotency key missing", "This request must carry an idempotency key."},
	problemKeyMalformed:  {ProblemKeyMalformed, "Idempotency key malformed", ""},
	problemBodyInvalid:   {ProblemBodyInvalid, "Request body invalid", ""},
	problemBodyTooLarge:  {ProblemBodyTooLarge, "Request body too large", ""},
	problemInFlight:      {ProblemInFlight, "Request in flight", "A request with this idempotency key is still being processed; retry later."},
	problemMismatch:      {ProblemMismatch, "Idempotency key reused", "This idempotency key was used for a different request."},
	problemUnavailable:   {ProblemUnavailable, "Idempotency store unavailable", "The request was not processed; retry later."},
	problemPending:       {ProblemUnavailable, "Idempotency store unavailable", "The request was processed, but its response could not be stored yet; retry later to receive it."},
	problemNotReplayable: {ProblemNotReplayable, "Response not replayable", "The request with this idempotency key was processed, but its response was streamed or too large to be stored."},
	problemFailed:        {ProblemFailed, "Request failed", "The request could not be completed."},
}

func (h *Handler) status(k problemKind) int {
	s := &h.c.statuses
	switch k {
	case problemKeyMissing:
		return s.KeyMissing
	case problemKeyMalformed:
		return s.KeyMalformed
	case problemBodyInvalid:
		return s.BodyInvalid
	case problemBodyTooLarge:
		return s.BodyTooLarge
	case problemInFlight:
		return s.InFlight
	case problemMismatch:
		return s.Mismatch
	case problemUnavailable, problemPending:
		return s.Unavailable
	case problemNotReplayable:
		return s.NotReplayable
	}
	return s.Failed
}

// fail answers the problem k caused by err.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, k problemKind, err error) {
	h.write(w, r, k, h.status(k), 0, err)
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, k problemKind, status, original int, err error) {
	t := problemTypes[k]
	p := Problem{Type: t.typ, Title: t.title, Status: status, Detail: t.detail, OriginalStatus: original, Err: err}
	switch k {
	case problemKeyMalformed, problemBodyInvalid, problemBodyTooLarge:
		// Our own and the fingerprint's messages describe the input,
		// never echo the key, and carry no infrastructure detail.
		if err != nil {
			p.Detail = err.Error()
		}
	case problemInFlight:
		w.Header()["Retry-After"] = []string{h.c.retryAfter[0]}
	case problemUnavailable, problemPending:
		w.Header()["Retry-After"] = []string{h.c.retryAfter[1]}
	}
	h.c.errWriter(w, r, p)
}

// fingerprintProblem classifies an error of Builder.RequestBody.
func fingerprintProblem(err error) problemKind {
	switch {
	case errors.Is(err, fingerprint.ErrTooLarge):
		return problemBodyTooLarge
	case errors.Is(err, fingerprint.ErrInvalidJSON), errors.Is(err, fingerprint.ErrDuplicateMember),
		errors.Is(err, fingerprint.ErrNumberRange), errors.Is(err, fingerprint.ErrInvalidString),
		errors.Is(err, fingerprint.ErrTooDeep):
		return problemBodyInvalid
	}
	return problemFailed // ErrInvalidPath: a misconfigured Builder
}

// storeProblem classifies an error of Store.Do that came without a
// response.
func storeProblem(err error) problemKind {
	var pe *tiered.PanicError
	switch {
	case errors.As(err, &pe):
		return problemFailed
	case errors.Is(err, idem.ErrMismatch):
		return problemMismatch
	case errors.Is(err, idem.ErrInFlight), errors.Is(err, idem.ErrLeaseLost):
		// Lease lost: the work ran here, but another owner took the key
		// over; a retry gets that owner's answer.
		return problemInFlight
	case errors.Is(err, tiered.ErrPending):
		return problemPending
	case errors.Is(err, idem.ErrUnavailable), errors.Is(err, tiered.ErrClosed):
		return problemUnavailable
	}
	return problemFailed
}
