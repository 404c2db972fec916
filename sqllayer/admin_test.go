package sqllayer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// admin returns an Admin over a layer of b, with an audit table of this
// test's own, created by Init and dropped when the test ends.
func admin(t *testing.T, b *backend) (*sqllayer.Layer, *sqllayer.Admin) {
	t.Helper()
	audit := testenv.Name("idem_audit")
	l, db := b.layer(t, sqllayer.WithAuditTable(audit))
	a := l.Admin()
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(c, "DROP TABLE IF EXISTS "+audit); err != nil {
			t.Errorf("drop %s: %v", audit, err)
		}
	})
	for range 2 { // idempotent
		if err := a.Init(ctx(t)); err != nil {
			t.Fatalf("Admin.Init: %v", err)
		}
	}
	return l, a
}

var note = sqllayer.Note{By: "oncall", Reason: "owner cut off"}

// An operator reads a claim with its token and labels, frees it with a
// compare-and-set, and the key is claimed again; the audit row says who,
// which key, which token and why.
func TestAdminReleaseFreesTheClaimRead(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		l, a := admin(t, setup(t, s))
		key := idem.NewKey("tenant-a", "pay-1")
		rec, claimed := must2(t, l, key)
		if !claimed {
			t.Fatal("first Reserve did not claim")
		}
		e := must.Get(a.Inspect(ctx(t), key))(t)
		if e.Token != rec.Token || e.State != idem.StateInProgress || e.Scope != "tenant-a" || e.ClientKey != "pay-1" ||
			e.Fingerprint != "fp" || e.LeaseLeft() <= 0 || e.Expired() || !e.Key.Equal(key) {
			t.Fatalf("Inspect = %+v (lease left %v), want the claim with token %q", e, e.LeaseLeft(), rec.Token)
		}
		stuck := must.Get(a.Stuck(ctx(t), 0, 10))(t)
		if len(stuck) != 1 || stuck[0].Token != rec.Token {
			t.Fatalf("Stuck(0) = %+v, want the one claim", stuck)
		}
		if got := must.Get(a.Stuck(ctx(t), time.Hour, 10))(t); len(got) != 0 {
			t.Fatalf("Stuck(1h) = %+v, want none: the lease is live and the claim young", got)
		}
		if out := must.Get(a.Release(ctx(t), e, note))(t); out != sqllayer.Freed {
			t.Fatalf("Release = %s, want freed", out)
		}
		if _, err := a.Inspect(ctx(t), key); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Inspect after Release: %v, want ErrNotFound", err)
		}
		if err := l.Complete(ctx(t), key, rec.Token, []byte("late"), time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
			t.Fatalf("the old owner's Complete after the release: %v, want ErrLeaseLost", err)
		}
		if _, claimed := must2(t, l, key); !claimed {
			t.Fatal("Reserve after the release did not claim")
		}
		if out := must.Get(a.Release(ctx(t), e, note))(t); out != sqllayer.Changed {
			t.Fatalf("Release of the old token over the new claim = %s, want changed", out)
		}
		trail := must.Get(a.Trail(ctx(t), key, 10))(t)
		if len(trail) != 2 {
			t.Fatalf("Trail = %+v, want two rows", trail)
		}
		first := trail[1]
		if first.By != "oncall" || first.Reason != "owner cut off" || first.Action != "release" || first.Tier != idem.TierSQL ||
			first.Outcome != sqllayer.Freed || first.Token != rec.Token || first.Scope != "tenant-a" || first.ClientKey != "pay-1" ||
			first.At.IsZero() || trail[0].Outcome != sqllayer.Changed {
			t.Fatalf("audit rows = %+v", trail)
		}
	})
}

// The release races the real owner's completion: whichever lands first,
// the owner's result is never lost unless the release freed the claim
// before it completed, and then the owner's completion is refused.
func TestAdminReleaseRacingTheOwner(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		l, a := admin(t, setup(t, s))
		// The owner completes between the operator's read and release:
		// the release frees nothing and the result stands.
		key := idem.NewKey("tenant-a", "race-ordered")
		rec, _ := must2(t, l, key)
		e := must.Get(a.Inspect(ctx(t), key))(t)
		if err := l.Complete(ctx(t), key, rec.Token, []byte("paid"), time.Hour); err != nil {
			t.Fatal(err)
		}
		if out := must.Get(a.Release(ctx(t), e, note))(t); out != sqllayer.Changed {
			t.Fatalf("Release after the owner completed = %s, want changed", out)
		}
		if got := must.Get(l.Get(ctx(t), key))(t); string(got.Result) != "paid" {
			t.Fatalf("record after the refused release = %+v, want the owner's result", got)
		}
		// At once, many times: exactly one of the two wins each time.
		for i := range 20 {
			key := idem.NewKey("tenant-a", "race-"+string(rune('a'+i)))
			rec, _ := must2(t, l, key)
			e := must.Get(a.Inspect(ctx(t), key))(t)
			var (
				wg          sync.WaitGroup
				out         sqllayer.Outcome
				relErr, err error
			)
			start := make(chan struct{})
			wg.Go(func() { <-start; out, relErr = a.Release(ctx(t), e, note) })
			wg.Go(func() { <-start; err = l.Complete(ctx(t), key, rec.Token, []byte("paid"), time.Hour) })
			close(start)
			wg.Wait()
			if relErr != nil {
				t.Fatal(relErr)
			}
			got, gerr := l.Get(ctx(t), key)
			switch {
			case out == sqllayer.Freed && errors.Is(err, idem.ErrLeaseLost) && errors.Is(gerr, idem.ErrNotFound):
			case out == sqllayer.Changed && err == nil && gerr == nil && string(got.Result) == "paid":
			default:
				t.Fatalf("race %d: release %s, complete %v, then Get %+v %v", i, out, err, got, gerr)
			}
		}
	})
}

// Release never frees a completed record, and Forget never an in-progress
// one; Forget frees the completed record read.
func TestAdminForgetOnlyCompleted(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		l, a := admin(t, setup(t, s))
		key := idem.NewKey("", "done")
		rec, _ := must2(t, l, key)
		if out := must.Get(a.Forget(ctx(t), must.Get(a.Inspect(ctx(t), key))(t), note))(t); out != sqllayer.Changed {
			t.Fatalf("Forget of an in-progress claim = %s, want changed", out)
		}
		if err := l.Complete(ctx(t), key, rec.Token, []byte("ok"), time.Hour); err != nil {
			t.Fatal(err)
		}
		e := must.Get(a.Inspect(ctx(t), key))(t)
		if e.State != idem.StateCompleted || string(e.Result) != "ok" {
			t.Fatalf("Inspect = %+v, want completed", e)
		}
		if out := must.Get(a.Release(ctx(t), e, note))(t); out != sqllayer.Changed {
			t.Fatalf("Release of a completed record = %s, want changed", out)
		}
		st := must.Get(a.Stats(ctx(t)))(t)
		if st.Completed != 1 || st.InProgress != 0 || st.Bytes <= 0 || st.Now.IsZero() {
			t.Fatalf("Stats = %+v, want one completed record and a size", st)
		}
		if out := must.Get(a.Forget(ctx(t), e, note))(t); out != sqllayer.Freed {
			t.Fatalf("Forget = %s, want freed", out)
		}
		if out := must.Get(a.Forget(ctx(t), e, note))(t); out != sqllayer.Absent {
			t.Fatalf("Forget again = %s, want absent", out)
		}
		if _, claimed := must2(t, l, key); !claimed {
			t.Fatal("Reserve after the forget did not claim")
		}
		if _, err := a.Release(ctx(t), e, sqllayer.Note{By: "oncall"}); err == nil {
			t.Fatal("Release without a reason succeeded")
		}
	})
}

// must2 reserves key for fingerprint "fp" with a minute's lease.
func must2(t *testing.T, l *sqllayer.Layer, key idem.Key) (idem.Record, bool) {
	t.Helper()
	rec, claimed, err := l.Reserve(ctx(t), key, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return rec, claimed
}

// A claim whose lease lapsed is stuck at any age; the stats count it in
// progress.
func TestAdminStuckFindsLapsedLeases(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		l, a := admin(t, setup(t, s))
		key := idem.NewKey("tenant-b", "slow")
		if _, _, err := l.Reserve(ctx(t), key, "fp", 20*time.Millisecond, time.Hour); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := must.Get(a.Stuck(ctx(t), time.Hour, 10))(t)
			if len(got) == 1 && got[0].Scope == "tenant-b" && got[0].LeaseLeft() <= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Stuck(1h) = %+v, want the lapsed claim", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
		st := must.Get(a.Stats(ctx(t)))(t)
		if st.InProgress != 1 || st.OldestClaim.IsZero() || st.Expired != 0 {
			t.Fatalf("Stats = %+v, want one claim in progress", st)
		}
	})
}

// The audit table's name follows the rules of the others, and is not one
// of them.
func TestWithAuditTableRefusesNonsense(t *testing.T) {
	db := testenv.SQLiteMemory(t).Open(t)
	for _, name := range []string{"", "a-b", "s.audit", sqllayer.DefaultRecordsTable} {
		if _, err := sqllayer.New(db, sqllayer.WithAuditTable(name)); !errors.Is(err, idem.ErrConfig) {
			t.Errorf("WithAuditTable(%q): %v, want ErrConfig", name, err)
		}
	}
}

// The janitor's runs are kept in the audit table, and Stats reads the last
// one back; without the table they are not kept, and that is no error.
func TestRecordSweep(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		bare, _ := b.layer(t, sqllayer.WithAuditTable(testenv.Name("idem_no_audit")))
		if err := bare.RecordSweep(ctx(t), 3, time.Millisecond, nil); err != nil {
			t.Fatalf("RecordSweep without an audit table: %v, want nil", err)
		}
		if st := must.Get(bare.Admin().Stats(ctx(t)))(t); !st.LastSweep.At.IsZero() {
			t.Fatalf("Stats without an audit table: last sweep %+v", st.LastSweep)
		}
		l, a := admin(t, b)
		if st := must.Get(a.Stats(ctx(t)))(t); !st.LastSweep.At.IsZero() {
			t.Fatalf("Stats before any sweep: last sweep %+v", st.LastSweep)
		}
		if err := l.RecordSweep(ctx(t), 7, 1500*time.Microsecond, nil); err != nil {
			t.Fatal(err)
		}
		if err := l.RecordSweep(ctx(t), 2, time.Millisecond, errors.New("statement timeout")); err != nil {
			t.Fatal(err)
		}
		st := must.Get(a.Stats(ctx(t)))(t)
		last := st.LastSweep
		if last.Outcome != sqllayer.SweepFailed || last.Action != "sweep" || last.At.IsZero() || st.Now.Sub(last.At) > time.Minute ||
			last.Reason != "after 2 rows in 1ms: statement timeout" {
			t.Fatalf("last sweep %+v (now %v), want the failed one", last, st.Now)
		}
	})
}
