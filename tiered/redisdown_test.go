package tiered_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// A call whose Redis claim failed does without Redis for the rest of it:
// it does not spend its caller's time on a best-effort write (the result
// for duplicates) to a Redis that just failed it. SQL holds the result;
// once Redis answers again, results reach it again.
func TestRedisFailedCallSkipsBestEffortWrites(t *testing.T) {
	st := stacktest.Embedded(t)
	fl := faultlayer.New(st.RedisLayer(t))
	s, err := tiered.New(tiered.WithRedis(fl.Waiting()), tiered.WithSQL(st.SQLLayer(t)), tiered.WithRedisFallback(100, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	work := func(context.Context) ([]byte, error) { return []byte("v"), nil }
	fl.Fail(fmt.Errorf("%w: connection refused", idem.ErrUnavailable), faultlayer.Reserve)
	if _, err := s.Do(t.Context(), idem.NewKey("", "down"), "fp", work); err != nil {
		t.Fatal(err)
	}
	if n := fl.Calls(faultlayer.Fill) + fl.Calls(faultlayer.Complete); n != 0 {
		t.Fatalf("%d writes to the Redis that failed the call", n)
	}
	fl.Up()
	if _, err := s.Do(t.Context(), idem.NewKey("", "up"), "fp", work); err != nil {
		t.Fatal(err)
	}
	// The result reaches Redis off the call's critical path.
	eventually(t, func() error {
		if n := fl.Calls(faultlayer.Complete); n != 1 {
			return fmt.Errorf("%d completions in Redis once it answers, want 1", n)
		}
		return nil
	})
}
