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
