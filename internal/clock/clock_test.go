package clock_test

import (
	"testing"
	"time"

	"github.com/idemkit/idem/internal/clock"
)

// The tests change the process-wide skew, so none of them runs in
// parallel, and each puts it back.

func TestNowIsTheRealClockWithoutSkew(t *testing.T) {
	before := time.Now()
	got := clock.Now()
	after := time.Now()
	if got.Before(before) || got.After(after) {
		t.Fatalf("Now() = %v, not between %v and %v", got, before, after)
	}
	if clock.Offset() != 0 {
		t.Fatalf("Offset() = %v with no skew set", clock.Offset())
	}
}

func TestSkewMovesTheWallClock(t *testing.T) {
	for _, d := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			clock.Skew(d)
			t.Cleanup(func() { clock.Skew(0) })
			if got := clock.Offset(); got != d {
				t.Fatalf("Offset() = %v, want %v", got, d)
			}
			before := time.Now().Round(0) // wall clock only
			got := clock.Now()
			after := time.Now().Round(0)
			// Compared by the wall clock (as a time from another machine
			// would be), the reading is off by d.
			wall := got.Round(0)
			if wall.Before(before.Add(d)) || wall.After(after.Add(d)) {
				t.Fatalf("Now() = %v, not between %v and %v", wall, before.Add(d), after.Add(d))
			}
		})
	}
}

func TestDurationsUnderOneSkewAreReal(t *testing.T) {
	clock.Skew(30 * time.Second)
	t.Cleanup(func() { clock.Skew(0) })
	start, real := clock.Now(), time.Now()
	time.Sleep(10 * time.Millisecond) // some real time must pass to be measured
	took, realTook := clock.Since(start), time.Since(real)
	if took < 10*time.Millisecond || took > realTook+time.Millisecond {
		t.Fatalf("Since() = %v under a constant skew, real %v", took, realTook)
	}
	// Two readings under the same skew compare as the real times do.
	if later := clock.Now(); !later.After(start) {
		t.Fatalf("a later reading %v is not after %v", later, start)
	}
}

func TestSkewZeroRemovesIt(t *testing.T) {
	clock.Skew(-time.Hour)
	clock.Skew(0)
	if clock.Offset() != 0 {
		t.Fatalf("Offset() = %v after Skew(0)", clock.Offset())
	}
	if d := clock.Now().Round(0).Sub(time.Now().Round(0)); d < -time.Second || d > time.Second {
		t.Fatalf("Now() is %v off the real clock after Skew(0)", d)
	}
}
