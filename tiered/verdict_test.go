package tiered

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// Every error Do can return has one verdict; a more specific error wins
// over the one it wraps.
func TestJudge(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Verdict
	}{
		{nil, VerdictResult},
		{&PanicError{Value: "boom"}, VerdictFailed},
		{&PanicError{Value: idem.ErrUnavailable}, VerdictFailed}, // a panic with a sentinel is still a panic
		{ErrNotCommitted, VerdictFailed},
		{errUncompleted, VerdictFailed},
		{fmt.Errorf("%w: %w", ErrNotCommitted, errors.New("insert failed")), VerdictFailed},
		{fmt.Errorf("%w: nope", idem.ErrConfig), VerdictFailed},
		{errors.New("fn's own"), VerdictFailed},
		{ErrGoexit, VerdictFailed},
		{context.Canceled, VerdictFailed},
		{idem.ErrMismatch, VerdictMismatch},
		{idem.ErrInFlight, VerdictInFlight},
		{fmt.Errorf("%w: another owner completed the key", idem.ErrLeaseLost), VerdictInFlight},
		{fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge), VerdictNotReplayable},
		{fmt.Errorf("%w: %w", ErrPending, idem.ErrUnavailable), VerdictPending},
		{idem.ErrUnavailable, VerdictUnavailable},
		{idem.ErrClosed, VerdictUnavailable},
		{idem.ErrInvalidKey, VerdictInvalid},
		{errNilFunc, VerdictInvalid},
	} {
		if got := Judge(c.err); got != c.want {
			t.Errorf("Judge(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if VerdictNotReplayable.String() != "not_replayable" || Verdict(99).String() != "unknown" {
		t.Fatal("names")
	}
}
