package sqllayer_test

import (
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
)

// TestPostgresInsertThatWaitedReadsAgain pins the trap of a claim-or-read
// statement: a Reserve whose INSERT waited for a concurrent, uncommitted
// claim of the same key finds, once that claim commits, neither an inserted
// row nor (with its old snapshot) the winner's. It must read again in a new
// statement and report the winner's record, not claim and not fail.
func TestPostgresInsertThatWaitedReadsAgain(t *testing.T) {
	r := newFaultRig(t)
	l := r.layer(t)
	k := idem.NewKey("trap", testenv.Name("k"))
	tx := r.insertUncommitted(t, k)
	type result struct {
		rec     idem.Record
		claimed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		done <- result{rec, claimed, err}
	}()
	r.waiterPID(t) // the INSERT waits for the uncommitted claim
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.claimed {
		t.Fatalf("Reserve after waiting for a committed claim: claimed=%v err=%v, want the winner's record", res.claimed, res.err)
	}
	if res.rec.State != idem.StateInProgress || res.rec.Fingerprint != "fp" || res.rec.Token != "" || res.rec.LeaseUntil.IsZero() {
		t.Fatalf("Reserve returned %+v, want the winner's in-progress record without its token", res.rec)
	}
}
