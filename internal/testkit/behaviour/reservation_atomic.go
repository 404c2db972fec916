package behaviour

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// runAtomicReservation runs the reservation rows with the Stores in the
// atomic mode (tiered.WithAtomic), where the handler writes its rows in
// the Store's transaction (sqllayer.TxFrom) and the Store completes: the
// atomic outcome of each row of the handler-ending table (idemtest.Endings,
// its Atomic column).
func runAtomicReservation(t *testing.T, c *charger, adapt ReservationAdapter) {
	start := func(t *testing.T) instance { return c.start(t, adapt) }

	t.Run("writes in the Store's transaction, every caller gets what committed", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "atomic-" + testenv.Name("c")
		runs := c.runs.Load()
		c.set(id, atomicCommit, nil)
		for _, in := range []instance{a, b, a} {
			got, err := post(t, t.Context(), in, id)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, id)
		}
		c.wantOnce(t, id, runs)
	})

	t.Run("the instance dies before the commit, the retry runs elsewhere and commits once", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "die-" + testenv.Name("c")
		runs := c.runs.Load()
		c.set(id, dieAfter, func() { go func() { _ = a.store.Close() }() })
		got, err := post(t, t.Context(), a, id)
		if err != nil || got.Status != http.StatusServiceUnavailable {
			t.Fatalf("the dying instance answered %+v, %v; want 503", got, err)
		}
		if n := c.count(t, id); n != 0 {
			t.Fatalf("%d charges after the instance died before its commit, want 0", n)
		}
		c.set(id, atomicCommit, nil)
		for _, in := range []instance{b, b} {
			got, err := post(t, t.Context(), in, id)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, id)
		}
		c.wantTwice(t, id, runs)
	})

	t.Run("the client's connection is cut while it runs, the retry replays elsewhere", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "cut-" + testenv.Name("c")
		runs := c.runs.Load()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		gone := make(chan struct{})
		c.set(id, cutAfter, func() {
			cancel()
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
			}
		})
		got, err := post(t, ctx, a, id)
		close(gone)
		if err == nil {
			t.Fatalf("the cut request got %+v", got)
		}
		// The work goes on after its client left, and commits: the retry
		// replays it once it has.
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err = post(t, t.Context(), b, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != http.StatusConflict || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		check(t, got, id)
		c.wantOnce(t, id, runs)
	})

	// A completion by hand is refused before it reaches the database: the
	// handler hears idem.ErrConfig, nothing commits, the first caller gets a
	// 500 problem; the retry, written as the mode wants it, commits once.
	for _, e := range []struct {
		name string
		m    mode
	}{
		{"writes, completes, commits", commit},
		{"completes, then rolls back", rollback},
		{"completes before writing anything", writeLater},
		{"completes; COMMIT would fail", commitFails},
		{"completes twice", completeTwice},
		{"completes again with other bytes", completeOther},
		{"changes the response after completing", changeAfter},
	} {
		t.Run(e.name+": refused, nothing commits, the retry runs again", func(t *testing.T) {
			c.needsFailingCommit(t, e.m)
			c.wantReleased(t, start, e.m, func(err error) bool { return errors.Is(err, idem.ErrConfig) })
		})
	}

	// Failures of the handler's own statements roll everything back.
	t.Run("a statement fails before writing anything: nothing commits, the retry runs again", func(t *testing.T) {
		c.wantReleased(t, start, failBefore, nil)
	})

	t.Run("takes its reservation and never completes: the Store completes", func(t *testing.T) {
		a, b := start(t), start(t)
		id := "never-" + testenv.Name("c")
		runs := c.runs.Load()
		c.set(id, neverComplete, nil)
		for _, in := range []instance{a, b} {
			got, err := post(t, t.Context(), in, id)
			if err != nil {
				t.Fatal(err)
			}
			check(t, got, id)
		}
		if n := c.runs.Load() - runs; n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
	})
}

// wantReleased checks an ending that commits nothing in the atomic mode:
// the first caller gets a 500 (a problem once the handler wrote), no charge commits, the handler heard
// what heard accepts (nil: anything); the retry, in the mode's own way,
// commits once on another instance.
func (c *charger) wantReleased(t *testing.T, start func(*testing.T) instance, m mode, heard func(error) bool) {
	t.Helper()
	a, b := start(t), start(t)
	id := fmt.Sprintf("atomic%d-%s", m, testenv.Name("c"))
	runs := c.runs.Load()
	c.set(id, m, nil)
	got, err := post(t, t.Context(), a, id)
	// Refused before it wrote anything, the handler answers its failure
	// itself (a 5xx, never kept); refused after, the response it wrote is
	// frozen and the middleware answers with a problem.
	if err != nil || got.Status != http.StatusInternalServerError || (m != writeLater && got.ContentType != "application/problem+json") {
		t.Fatalf("%+v, %v; want a 500 problem", got, err)
	}
	if heard != nil && !heard(c.err(id)) {
		t.Fatalf("the handler heard %v", c.err(id))
	}
	if n := c.count(t, id); n != 0 {
		t.Fatalf("%d charges after nothing committed", n)
	}
	c.set(id, atomicCommit, nil)
	for _, in := range []instance{b, a} {
		got, err := post(t, t.Context(), in, id)
		if err != nil {
			t.Fatal(err)
		}
		check(t, got, id)
	}
	c.wantTwice(t, id, runs)
}

// wantTwice fails t unless the handler ran twice since runs was read (the
// first run committed nothing) and the charge id exists once.
func (c *charger) wantTwice(t *testing.T, id string, runs int64) {
	t.Helper()
	if n := c.runs.Load() - runs; n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
	if n := c.count(t, id); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}
