package sqllayer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestApplicationClockDecidesNothing: instances whose application clocks are
// 5 minutes ahead of or behind the database's neither take a live lease over
// early nor miss a lapsed one, and see records expire when the database says.
func TestApplicationClockDecidesNothing(t *testing.T) {
	const lease = 300 * time.Millisecond
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		t.Parallel()
		b := setup(t, s)
		owner, _ := b.layer(t)
		for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
			t.Run(fmt.Sprint(skew), func(t *testing.T) {
				skewed, _ := b.layer(t, sqllayer.WithClock(func() time.Time { return time.Now().Add(skew) }))
				k := idem.NewKey("clock", testenv.Name("k"))
				first, _, err := owner.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				rec, claimed, err := skewed.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil || claimed || rec.State != idem.StateInProgress {
					t.Fatalf("skewed instance during the lease: claimed=%v err=%v, want the owner's claim", claimed, err)
				}
				if err := skewed.Renew(ctx(t), k, "not-mine", lease); err == nil {
					t.Fatal("a foreign token renewed")
				}
				time.Sleep(2 * lease)
				rec, claimed, err = skewed.Reserve(ctx(t), k, "fp", lease, time.Hour)
				if err != nil || !claimed || rec.Token == first.Token {
					t.Fatalf("skewed instance after the lease: claimed=%v err=%v, want a takeover", claimed, err)
				}
				// Retention by the database's clock too.
				if err := skewed.Complete(ctx(t), k, rec.Token, []byte("ok"), 2*lease); err != nil {
					t.Fatal(err)
				}
				if _, err := skewed.Get(ctx(t), k); err != nil {
					t.Fatalf("Get within the retention: %v", err)
				}
				time.Sleep(3 * lease)
				if _, err := skewed.Get(ctx(t), k); err == nil {
					t.Fatal("Get after the retention found the record")
				}
			})
		}
	})
}

// TestClaimTimesAreTheStoredOnes: the lease and expiry a claim reports are
// the ones the database stored, by its clock.
func TestClaimTimesAreTheStoredOnes(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		t.Parallel()
		l, _ := setup(t, s).layer(t)
		for i, takeover := range []bool{false, true} {
			k := idem.NewKey("times", testenv.Name(fmt.Sprint(i)))
			rec, _, err := l.Reserve(ctx(t), k, "fp", 200*time.Millisecond, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if takeover {
				time.Sleep(400 * time.Millisecond)
				if rec, _, err = l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			got, err := l.Get(ctx(t), k)
			if err != nil || !got.LeaseUntil.Equal(rec.LeaseUntil) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
				t.Fatalf("takeover=%v: claim said %v / %v, stored %v / %v (%v)", takeover, rec.LeaseUntil, rec.ExpiresAt, got.LeaseUntil, got.ExpiresAt, err)
			}
			if d := got.ExpiresAt.Sub(got.LeaseUntil); d < 59*time.Minute {
				t.Fatalf("expiry %v after the lease, want the hour's retention", d)
			}
		}
	})
}
