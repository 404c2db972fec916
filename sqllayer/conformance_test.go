package sqllayer_test

import (
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the conformance suite on every SQL backend, each
// Layer over its own pool and all of them over the same tables.
func TestConformance(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		t.Parallel()
		b := setup(t, s)
		keys := 0 // the suite's default
		if !s.Real {
			// SQLite is Go code here, which the race detector slows down
			// more than ten times; fewer keys keep the run short.
			keys = 150
		}
		storetest.Run(t, storetest.Harness{
			Keys: keys,
			New: func(t *testing.T) idem.Layer {
				l, _ := b.layer(t)
				return l
			},
			// Servers compare microseconds, SQLite milliseconds; a few
			// hundred milliseconds leave room for slow shared machines.
			Tick: 300 * time.Millisecond,
		})
	})
}
