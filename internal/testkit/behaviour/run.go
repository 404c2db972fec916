package behaviour

import (
	"testing"

	"github.com/idemkit/idem/middleware/idemtest"
)

// Run runs idemtest.Run with s on every backend of Backends, one after the
// other, s.Tiers replaced by the backend's.
func Run(t *testing.T, s idemtest.Stack) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			on := s // s with this backend's tiers
			on.Tiers = b.Open
			idemtest.Run(t, on)
		})
	}
}

// RunBurst runs idemtest.RunBurst with s for rounds on every backend of
// Backends at once, s.Tiers replaced by the backend's.
func RunBurst(t *testing.T, s idemtest.Stack, rounds int) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel() // the memory backend mostly sleeps between polls
			on := s      // s with this backend's tiers; backends run at once
			on.Tiers = b.Open
			idemtest.RunBurst(t, on, rounds)
		})
	}
}
