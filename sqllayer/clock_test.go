package sqllayer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestApplicationClockDecidesNothing: instances whose application clocks are
// 5 minutes ahead of or behind the database's neither take a live lease over
// early nor miss a lapsed one (they grant its grace, then take it over), and
// see records expire when the database says.
func TestApplicationClockDecidesNothing(t *testing.T) {
	// Long enough that the check within the lease runs within it on a slow
	// machine.
	const lease = time.Second
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		owner, _ := b.layer(t)
		skews := []time.Duration{5 * time.Minute, -5 * time.Minute}
		skewed := make([]*sqllayer.Layer, len(skews))
		keys := make([]idem.Key, len(skews))
		first := make([]idem.Record, len(skews))
		for i, skew := range skews {
			skewed[i], _ = b.layer(t, sqllayer.WithClock(func() time.Time { return time.Now().Add(skew) }))
			keys[i] = idem.NewKey("clock", testenv.Name(fmt.Sprint(i)))
			var err error
			if first[i], _, err = owner.Reserve(ctx(t), keys[i], "fp", lease, time.Hour); err != nil {
				t.Fatal(err)
			}
			rec, claimed, err := skewed[i].Reserve(ctx(t), keys[i], "fp", lease, time.Hour)
			if err != nil || claimed || rec.State != idem.StateInProgress {
				t.Fatalf("skew %v during the lease: claimed=%v err=%v, want the owner's claim", skew, claimed, err)
			}
		}
		time.Sleep(2 * lease)
		for i, l := range skewed {
			rec, claimed, err := l.Reserve(ctx(t), keys[i], "fp", lease, time.Hour)
			if err != nil || claimed || rec.State != idem.StateInProgress {
				t.Fatalf("skew %v after the lease: claimed=%v err=%v, want the owner's grace", skews[i], claimed, err)
			}
		}
		time.Sleep(lease) // past the grace, a quarter of the lease
		const retention = 500 * time.Millisecond
		for i, l := range skewed {
			rec, claimed, err := l.Reserve(ctx(t), keys[i], "fp", lease, time.Hour)
			if err != nil || !claimed || rec.Token == first[i].Token {
				t.Fatalf("skew %v after the grace: claimed=%v err=%v, want a takeover", skews[i], claimed, err)
			}
			// Retention by the database's clock too.
			if err := l.Complete(ctx(t), keys[i], rec.Token, []byte("ok"), retention); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * retention)
		for i, l := range skewed {
			if _, err := l.Get(ctx(t), keys[i]); err == nil {
				t.Fatalf("skew %v: Get after the retention found the record", skews[i])
			}
		}
	})
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
