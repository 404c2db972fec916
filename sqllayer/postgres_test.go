package sqllayer_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestPostgresInsertThatWaitedReadsAgain: a Reserve whose INSERT waited for
// a concurrent, uncommitted claim of the same key reports, once that claim
// commits, the winner's record: it neither claims nor fails. In the
// sqllayer.OrderOneRoundTrip order this pins the trap of the claim-or-read statement,
// whose read branch uses the snapshot taken before the wait and finds
// nothing: the layer must read again in a new statement.
func TestPostgresInsertThatWaitedReadsAgain(t *testing.T) {
	for _, order := range []idem.ReserveOrder{idem.OrderReadFirst, idem.OrderClaimFirst, sqllayer.OrderOneRoundTrip} {
		t.Run(orderName(order), func(t *testing.T) {
			insertThatWaited(t, sqllayer.WithReserveOrder(order))
		})
	}
}

func insertThatWaited(t *testing.T, opt sqllayer.Option) {
	r := newFaultRig(t)
	l := r.layer(t, opt)
	k := idem.NewKey("trap", testenv.Name("k"))
	tx := r.insertUncommitted(t, k)
	done := reserveAsync(t, l, k)
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
