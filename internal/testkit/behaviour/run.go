package behaviour

import (
	"testing"

	"github.com/idemkit/idem/middleware/idemtest"
)

// Run runs idemtest.Run with s on every backend of Backends, one after the
// other, s.Tiers replaced by the backend's; on a backend whose SQL tier
// runs executions in a transaction, once more in the atomic mode.
func Run(t *testing.T, s idemtest.Stack) {
	t.Helper()
	for _, b := range modes(Backends(t)) {
		t.Run(b.name, func(t *testing.T) {
			on := s // s with this backend's tiers and mode
			on.Tiers, on.Atomic = b.Open, b.atomic
			idemtest.Run(t, on)
		})
	}
}

// storeMode is a backend in one mode of the Store.
type storeMode struct {
	Backend
	name   string
	atomic bool
}

// modes returns each backend in the Store's default mode, and in the
// atomic mode where it has it.
func modes(bs []Backend) []storeMode {
	var out []storeMode
	for _, b := range bs {
		out = append(out, storeMode{Backend: b, name: b.Name})
		if b.Atomic {
			out = append(out, storeMode{Backend: b, name: b.Name + "+atomic", atomic: true})
		}
	}
	return out
}

// RunBurst runs idemtest.RunBurst with s for rounds on every backend of
// Backends at once, s.Tiers replaced by the backend's, and in the atomic
// mode where the backend has it.
func RunBurst(t *testing.T, s idemtest.Stack, rounds int) {
	t.Helper()
	for _, b := range modes(Backends(t)) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel() // the memory backend mostly sleeps between polls
			on := s      // s with this backend's tiers and mode; backends run at once
			on.Tiers, on.Atomic = b.Open, b.atomic
			idemtest.RunBurst(t, on, rounds)
		})
	}
}
