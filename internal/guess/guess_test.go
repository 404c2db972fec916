package guess_test

import (
	"testing"

	"github.com/idemkit/idem/internal/guess"
)

// A new counter is on the edge: one event of the other side turns it.
func TestNewIsOnTheEdge(t *testing.T) {
	for _, likely := range []bool{false, true} {
		g := guess.New(likely)
		if g.Likely() != likely {
			t.Fatalf("New(%v) guesses %v", likely, g.Likely())
		}
		g.Learn(!likely)
		if g.Likely() == likely {
			t.Fatalf("New(%v): one event of the other side did not turn the guess", likely)
		}
	}
}

// The guess follows a workload that changes, within the ceiling's worth of
// events, and ignores the odd event that does not fit.
func TestFollowsTheWorkload(t *testing.T) {
	g := guess.New(false)
	for range 100 {
		g.Learn(true)
	}
	for range 5 {
		g.Learn(false)
	}
	if !g.Likely() {
		t.Fatal("a few odd events among many flipped the guess")
	}
	// Saturated at 32 however long the run before, then down 5: 12 more
	// events the other way take it below the half (16).
	turned := 0
	for g.Likely() {
		g.Learn(false)
		if turned++; turned > 32 {
			t.Fatal("the guess never turned")
		}
	}
	if turned != 12 {
		t.Fatalf("turned after %d events, want 12", turned)
	}
	for range 100 {
		g.Learn(false)
	}
	g.Learn(true)
	if g.Likely() {
		t.Fatal("one event among many of the other side flipped the guess")
	}
}
