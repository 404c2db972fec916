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
		conformance(t, setup(t, s))
	})
}

// TestConformanceClaimFirst runs the suite with WithClaimFirst on the
// servers, where it changes the statements Reserve sends.
func TestConformanceClaimFirst(t *testing.T) {
	servers(t, func(t *testing.T, s *testenv.SQL) {
		t.Parallel()
		conformance(t, setup(t, s), sqllayer.WithClaimFirst(true))
	})
}

func conformance(t *testing.T, b *backend, opts ...sqllayer.Option) {
	storetest.Run(t, storetest.Harness{
		// TestEightInstancesThousandKeys covers a thousand keys on the
		// servers; here fewer keep the run short, above all on SQLite,
		// which is Go code that the race detector slows down tenfold.
		Keys: 150,
		New: func(t *testing.T) idem.Layer {
			l, _ := b.layer(t, opts...)
			return l
		},
		// Servers compare microseconds, SQLite milliseconds; a few
		// hundred milliseconds leave room for slow shared machines.
		Tick: 300 * time.Millisecond,
	})
}
