package idem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
)

// A constructor's refusal nested under another package's option reads as
// one fault of that option, with ErrConfig's text said once by the outer
// refusal, and keeps everything it wraps.
func TestNestedConfigError(t *testing.T) {
	_, inner := fingerprint.New(fingerprint.WithAllow("a..b"))
	if inner == nil {
		t.Fatal("fingerprint.New took a malformed path")
	}
	nested := idem.NestedConfigError("WithFingerprint", inner)
	outer := fmt.Errorf("%w: idemgrpc: %w", idem.ErrConfig, nested)
	want := "idem: configuration error: idemgrpc: WithFingerprint: fingerprint: WithAllow: "
	if got := outer.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("nested refusal reads %q, want it to start %q", got, want)
	}
	if !errors.Is(nested, idem.ErrConfig) || !errors.Is(nested, fingerprint.ErrInvalidPath) {
		t.Errorf("the nested refusal lost its chain: %v", nested)
	}
	plain := errors.New("WithZ: give a path")
	if got := idem.NestedConfigError("Payload", plain); got.Error() != "Payload: WithZ: give a path" || !errors.Is(got, plain) {
		t.Errorf("a plain error nested reads %q", got)
	}
}
