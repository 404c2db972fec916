package idemgrpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/tiered"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail on every
// status the interceptor answers of its own; its Reason is one of the
// Reason constants.
const ErrorDomain = "idem.idemkit.github.com"

// The reasons of the ErrorInfo detail, one per situation (the package
// documentation has the table). A client tells the interceptor's answers
// from its handlers' by ErrorDomain and these.
const (
	ReasonKeyMissing     = "IDEMPOTENCY_KEY_MISSING"     // InvalidArgument
	ReasonKeyMalformed   = "IDEMPOTENCY_KEY_MALFORMED"   // InvalidArgument
	ReasonRequestInvalid = "REQUEST_NOT_FINGERPRINTABLE" // InvalidArgument, or ResourceExhausted when too large
	ReasonInFlight       = "REQUEST_IN_FLIGHT"           // Aborted, with RetryInfo
	ReasonLeaseLost      = "LEASE_LOST"                  // Aborted, with RetryInfo
	ReasonMismatch       = "IDEMPOTENCY_KEY_REUSED"      // FailedPrecondition
	ReasonUnavailable    = "STORE_UNAVAILABLE"           // Unavailable, with RetryInfo
	ReasonPending        = "RESULT_PENDING"              // Unavailable, with RetryInfo
	ReasonNotReplayable  = "NOT_REPLAYABLE"              // FailedPrecondition
	ReasonScopeMissing   = "SCOPE_MISSING"               // Unauthenticated: WithScope named no principal
	ReasonFailed         = "FAILED"                      // Internal
)

// problem is one of the interceptor's own answers.
type problem struct {
	code   codes.Code
	reason string
	msg    string
	retry  bool // with RetryInfo
	// delay picks the RetryInfo delay: in flight (true) or unavailable.
	inFlight bool
}

var (
	probKeyMissing    = problem{code: codes.InvalidArgument, reason: ReasonKeyMissing, msg: "this call must carry an idempotency key"}
	probKeyMalformed  = problem{code: codes.InvalidArgument, reason: ReasonKeyMalformed, msg: "malformed idempotency key"}
	probInvalid       = problem{code: codes.InvalidArgument, reason: ReasonRequestInvalid, msg: "the request message cannot be fingerprinted"}
	probTooLarge      = problem{code: codes.ResourceExhausted, reason: ReasonRequestInvalid, msg: "the request message is too large to fingerprint"}
	probInFlight      = problem{code: codes.Aborted, reason: ReasonInFlight, msg: "a call with this idempotency key is still being processed; retry later", retry: true, inFlight: true}
	probLeaseLost     = problem{code: codes.Aborted, reason: ReasonLeaseLost, msg: "the call ran, but another owner took its idempotency key over; retry to receive that owner's answer", retry: true, inFlight: true}
	probMismatch      = problem{code: codes.FailedPrecondition, reason: ReasonMismatch, msg: "this idempotency key was used for a different request"}
	probUnavailable   = problem{code: codes.Unavailable, reason: ReasonUnavailable, msg: "the idempotency store is unavailable; the call was not processed; retry later", retry: true}
	probPending       = problem{code: codes.Unavailable, reason: ReasonPending, msg: "the call was processed, but its answer could not be stored yet; retry later to receive it", retry: true}
	probNotReplayable = problem{code: codes.FailedPrecondition, reason: ReasonNotReplayable, msg: "the call with this idempotency key was processed, but its answer was too large to be stored"}
	probClosed        = problem{code: codes.Unavailable, reason: ReasonUnavailable, msg: "the idempotency store is closing (the server is shutting down); retry later", retry: true}
	probPanic         = problem{code: codes.Internal, reason: ReasonFailed, msg: "the call failed: its handler panicked"}
	probNoResponse    = problem{code: codes.Internal, reason: ReasonFailed, msg: "the call failed: its handler returned no response message and no error"}
	probNotCommitted  = problem{code: codes.Internal, reason: ReasonFailed, msg: "the call failed: its handler completed its idempotency key in a transaction that did not commit; nothing is stored, and a retry runs the call again"}
	probDiffers       = problem{code: codes.Internal, reason: ReasonFailed, msg: "the call ran, but its handler did not return the answer it completed in its transaction (it returned another, or an error, or panicked); the completed answer is stored, and a retry receives it"}
	probScopeMissing  = problem{code: codes.Unauthenticated, reason: ReasonScopeMissing, msg: "this call names no caller that its idempotency key could be bound to"}
	probFailed        = problem{code: codes.Internal, reason: ReasonFailed, msg: "the call could not be completed"}
)

// err returns the status error of p, with detail (the client's fault, in
// words) after its message when given.
func (i *interceptor) err(p problem, detail string) error {
	msg := p.msg
	if detail != "" {
		msg += ": " + detail
	}
	st := status.New(p.code, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: p.reason, Domain: ErrorDomain}}
	if p.retry {
		d := i.c.unavailable
		if p.inFlight {
			d = i.c.inFlight
		}
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// failure is the one decision of what a call answers when Store.Do
// returned an error and no answer to send (its own context's end aside):
// the interceptor's problem p, or, when handlerErr is not nil, the
// handler's error as it returned it. Every error the Store and its layers
// name has its row, in the order checked (an error may wrap several):
//
//   - *tiered.PanicError: the handler panicked, the key is released:
//     Internal, FAILED.
//   - idem.ErrConfig: a setup mistake on the server (a missing table, a
//     completion in a transaction of a layer that does not hold the
//     reservation); no retry helps, and its details are the operator's:
//     Internal, FAILED.
//   - idem.ErrLeaseLost: the handler ran (or began), but another owner took
//     the key over, and its answer stands; a retry receives it: Aborted,
//     LEASE_LOST, RetryInfo. It comes before the handler's error: a
//     handler cut off by the loss of its lease fails for that reason.
//   - a handler error the keep policy did not keep: the key is released;
//     the handler's error, as it returned it (with tiered.ErrNotCommitted
//     too: its transaction rolled back, as it said).
//   - tiered.ErrNotCommitted: the handler completed its key in a
//     transaction that did not commit, and returned no error; nothing is
//     stored, the key is released, a retry runs again: Internal, FAILED.
//   - the handler returned no message (nil, nil): the key is released:
//     Internal, FAILED.
//   - idem.ErrMismatch: FailedPrecondition, IDEMPOTENCY_KEY_REUSED.
//   - idem.ErrInFlight: the owner was still at work past the Store's wait:
//     Aborted, REQUEST_IN_FLIGHT, RetryInfo.
//   - tiered.ErrPending (which wraps idem.ErrUnavailable): the handler ran,
//     its answer is not stored yet: Unavailable, RESULT_PENDING, RetryInfo.
//   - tiered.ErrNotReplayable: the answer was too large to keep: a retry
//     gets FailedPrecondition, NOT_REPLAYABLE (the first call, and the calls
//     that shared its execution, get the answer itself).
//   - idem.ErrClosed (a Wait ended by a closing layer also wraps
//     idem.ErrUnavailable): the server is shutting down: Unavailable,
//     STORE_UNAVAILABLE, RetryInfo.
//   - idem.ErrUnavailable: the stores could not decide, the handler did
//     not run: Unavailable, STORE_UNAVAILABLE, RetryInfo.
//   - anything else (an answer that cannot be encoded, a stored answer that
//     cannot be read): Internal, FAILED.
func failure(err error) (p problem, handlerErr error) {
	var (
		pe *tiered.PanicError
		hf *handlerFailed
	)
	// The kind of answer is the Store's one decision (tiered.Judge), the
	// HTTP middleware's too; within it, gRPC says more.
	switch tiered.Judge(err) {
	case tiered.VerdictFailed:
		switch {
		case errors.As(err, &pe):
			return probPanic, nil
		case errors.Is(err, idem.ErrConfig):
			return probFailed, nil
		case errors.As(err, &hf):
			return problem{}, hf.err
		case errors.Is(err, tiered.ErrNotCommitted):
			return probNotCommitted, nil
		case errors.Is(err, errNotProto):
			return probNoResponse, nil
		}
	case tiered.VerdictInFlight:
		if errors.Is(err, idem.ErrLeaseLost) {
			return probLeaseLost, nil
		}
		return probInFlight, nil
	case tiered.VerdictMismatch:
		return probMismatch, nil
	case tiered.VerdictPending:
		return probPending, nil
	case tiered.VerdictNotReplayable:
		return probNotReplayable, nil
	case tiered.VerdictUnavailable:
		if errors.Is(err, idem.ErrClosed) {
			return probClosed, nil
		}
		return probUnavailable, nil
	}
	return probFailed, nil
}

// fingerprintProblem classifies an error of Fingerprint, and whether its
// text describes the client's message.
func fingerprintProblem(err error) (problem, bool) {
	switch {
	case errors.Is(err, fingerprint.ErrBodyTooLarge):
		return probTooLarge, true
	case errors.Is(err, fingerprint.ErrInvalidJSON), errors.Is(err, fingerprint.ErrDuplicateMember),
		errors.Is(err, fingerprint.ErrNumberRange), errors.Is(err, fingerprint.ErrInvalidString),
		errors.Is(err, fingerprint.ErrTooDeep):
		return probInvalid, true
	}
	// protojson could not write the message (an Any of a type this server
	// does not link in): the server's setup, not the client's fault.
	return probFailed, false
}

// contextStatus is the answer to a call whose own context ended while it
// waited: Canceled or DeadlineExceeded.
func contextStatus(ctx context.Context) error {
	return status.FromContextError(ctx.Err()).Err()
}
