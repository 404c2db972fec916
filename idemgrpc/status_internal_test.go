package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// failure gives every error of the Store its answer, and an error that is
// several the answer of the first in its order.
func TestFailure(t *testing.T) {
	handlerErr := status.Error(codes.Unavailable, "provider down")
	failed := &handlerFailed{err: handlerErr}
	refused := fmt.Errorf("%w: the reservation is held by another layer", idem.ErrConfig)
	for _, c := range []struct {
		name    string
		err     error
		code    codes.Code
		reason  string
		msg     string // a part of the message
		handler bool   // the handler's error, as it returned it
	}{
		{"panic", &tiered.PanicError{Value: "boom"}, codes.Internal, ReasonFailed, "panicked", false},
		{"panic in a transaction that did not commit", fmt.Errorf("%w: %w", tiered.ErrNotCommitted, &tiered.PanicError{Value: "boom"}), codes.Internal, ReasonFailed, "panicked", false},
		{"configuration", fmt.Errorf("%w: no table", idem.ErrConfig), codes.Internal, ReasonFailed, "could not be completed", false},
		{"refused completion beside the handler's error", errors.Join(refused, failed), codes.Internal, ReasonFailed, "could not be completed", false},
		{"lease lost", fmt.Errorf("%w: another owner completed the key", idem.ErrLeaseLost), codes.Aborted, ReasonLeaseLost, "another owner", false},
		{"lease lost, the handler cut off", fmt.Errorf("%w: %w", idem.ErrLeaseLost, &handlerFailed{err: context.Canceled}), codes.Aborted, ReasonLeaseLost, "another owner", false},
		{"handler error", failed, codes.Unavailable, "", "provider down", true},
		{"handler error, its transaction rolled back", fmt.Errorf("%w: %w", tiered.ErrNotCommitted, failed), codes.Unavailable, "", "provider down", true},
		{"not committed", tiered.ErrNotCommitted, codes.Internal, ReasonFailed, "did not commit", false},
		{"no response", fmt.Errorf("%w: the handler's response is <nil>", errNotProto), codes.Internal, ReasonFailed, "no response message", false},
		{"mismatch", idem.ErrMismatch, codes.FailedPrecondition, ReasonMismatch, "different request", false},
		{"in flight", idem.ErrInFlight, codes.Aborted, ReasonInFlight, "still being processed", false},
		{"pending", fmt.Errorf("%w: %w", tiered.ErrPending, idem.ErrUnavailable), codes.Unavailable, ReasonPending, "not be stored yet", false},
		{"not replayable", fmt.Errorf("%w: %w", tiered.ErrNotReplayable, idem.ErrTooLarge), codes.FailedPrecondition, ReasonNotReplayable, "too large", false},
		{"closed", idem.ErrClosed, codes.Unavailable, ReasonUnavailable, "closing", false},
		{"wait ended by a closing layer", fmt.Errorf("%w: %w", idem.ErrClosed, idem.ErrUnavailable), codes.Unavailable, ReasonUnavailable, "closing", false},
		{"unavailable", fmt.Errorf("%w: dial tcp: refused", idem.ErrUnavailable), codes.Unavailable, ReasonUnavailable, "not processed", false},
		{"anything else", errors.New("stored answer unreadable"), codes.Internal, ReasonFailed, "could not be completed", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, herr := failure(c.err)
			if c.handler {
				if herr != handlerErr {
					t.Fatalf("got %v, %v; want the handler's error", p, herr)
				}
				return
			}
			if herr != nil {
				t.Fatalf("got the handler's error %v, want the interceptor's answer", herr)
			}
			if p.code != c.code || p.reason != c.reason || !strings.Contains(p.msg, c.msg) {
				t.Errorf("got %v %s %q, want %v %s saying %q", p.code, p.reason, p.msg, c.code, c.reason, c.msg)
			}
			if wantRetry := c.code == codes.Aborted || c.code == codes.Unavailable; p.retry != wantRetry {
				t.Errorf("RetryInfo %v, want %v", p.retry, wantRetry)
			}
		})
	}
}
