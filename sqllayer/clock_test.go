package sqllayer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/clock"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// TestApplicationClockDecidesNothing: with the application's clock 5
// minutes ahead of or behind the database's, instances neither take a live
// lease over early nor miss a lapsed one (they grant its grace, then take
// it over), and see records expire when the database says. The layer reads
// no application clock (it has no option for one): the skew is set on the
// application's wall clock, package clock, through which any reading
// compared with the database's would have to go.
func TestApplicationClockDecidesNothing(t *testing.T) {
	// Long enough that the check within the lease runs within it on a slow
	// machine.
	const lease = time.Second
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		t.Run(fmt.Sprint("skew", skew), func(t *testing.T) {
			clock.Skew(skew)
			t.Cleanup(func() { clock.Skew(0) })
			allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
				b := setup(t, s)
				owner, _ := b.layer(t)
				other, _ := b.layer(t)
				k := idem.NewKey("clock", testenv.Name("k"))
				first, _, err := owner.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				rec, claimed, err := other.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil || claimed || rec.State != idem.StateInProgress {
					t.Fatalf("during the lease: claimed=%v err=%v, want the owner's claim", claimed, err)
				}
				time.Sleep(2 * lease)
				rec, claimed, err = other.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil || claimed || rec.State != idem.StateInProgress {
					t.Fatalf("after the lease: claimed=%v err=%v, want the owner's grace", claimed, err)
				}
				time.Sleep(lease) // past the grace, a quarter of the lease
				rec, claimed, err = other.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil || !claimed || rec.Token == first.Token {
					t.Fatalf("after the grace: claimed=%v err=%v, want a takeover", claimed, err)
				}
				// Retention by the database's clock too.
				const retention = 500 * time.Millisecond
				if err := other.Complete(ctx(t), k, rec.Token, []byte("ok"), retention); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * retention)
				if _, err := other.Get(ctx(t), k); err == nil {
					t.Fatal("Get after the retention found the record")
				}
			})
		})
	}
}

// TestClaimTimesAreTheStoredOnes: the lease and expiry a claim, a grace and
// a takeover report are the ones the database stored, by its clock.
func TestClaimTimesAreTheStoredOnes(t *testing.T) {
	const lease = 200 * time.Millisecond
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		l, _ := setup(t, s).layer(t)
		k := idem.NewKey("times", testenv.Name("k"))
		check := func(what string, rec idem.Record) {
			t.Helper()
			got, err := l.Get(ctx(t), k)
			if err != nil || !got.LeaseUntil.Equal(rec.LeaseUntil) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
				t.Fatalf("%s said %v / %v, stored %v / %v (%v)", what, rec.LeaseUntil, rec.ExpiresAt, got.LeaseUntil, got.ExpiresAt, err)
			}
			if d := got.ExpiresAt.Sub(got.LeaseUntil); d < 59*time.Minute {
				t.Fatalf("%s: expiry %v after the lease, want the hour's retention", what, d)
			}
		}
		for _, step := range []struct {
			what    string
			pause   time.Duration
			claimed bool
		}{
			{"claim", 0, true},
			{"grace", 2 * lease, false},
			{"takeover", lease, true},
		} {
			time.Sleep(step.pause)
			rec, claimed, err := l.Reserve(ctx(t), k, "fp", lease, time.Hour)
			if err != nil || claimed != step.claimed {
				t.Fatalf("%s: claimed=%v err=%v, want claimed=%v", step.what, claimed, err, step.claimed)
			}
			check(step.what, rec)
		}
	})
}
