package sqllayer_test

import (
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the conformance suite on every SQL backend, each
// Layer over its own pool and all of them over the same tables.
func TestConformance(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		t.Parallel()
		// TestEightInstancesThousandKeys covers a thousand keys on the
		// servers; here fewer keep the run short, above all on SQLite,
		// which is Go code that the race detector slows down tenfold.
		conformance(t, setup(t, s), 150)
	})
}

// TestConformanceOrders runs the suite on the servers in each fixed order of
// Reserve's statements (the default adapts between the first two).
func TestConformanceOrders(t *testing.T) {
	for _, o := range []sqllayer.ReserveOrder{sqllayer.ReadFirst, sqllayer.InsertFirst, sqllayer.OneStatement} {
		t.Run(o.String(), func(t *testing.T) {
			servers(t, func(t *testing.T, s *testenv.SQL) {
				t.Parallel()
				conformance(t, setup(t, s), 50, sqllayer.WithReserveOrder(o))
			})
		})
	}
}

func conformance(t *testing.T, b *backend, keys int, opts ...sqllayer.Option) {
	storetest.Run(t, storetest.Harness{
		Keys: keys,
		New: func(t *testing.T) idem.Layer {
			l, _ := b.layer(t, opts...)
			return l
		},
		// Servers compare microseconds, SQLite milliseconds; a few
		// hundred milliseconds leave room for slow shared machines.
		Tick: 300 * time.Millisecond,
	})
}
