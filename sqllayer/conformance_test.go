package sqllayer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the conformance suite on every SQL backend in the
// default order of Reserve's statements, and on the servers in each fixed
// order too (the default adapts between the first two). Within a run each
// Layer has its own pool, all over the same tables.
//
// The runs spend most of their time waiting out leases, so they run at
// once, each in its own goroutine, whatever -parallel says; their pools are
// small enough that the servers, shared with other packages' tests, keep
// connections to spare.
func TestConformance(t *testing.T) {
	type run struct {
		name  string
		open  func(testing.TB) *testenv.SQL
		order idem.ReserveOrder
		conns int
		batch int // WithBatchSize
	}
	runs := []run{
		{"postgres", testenv.Postgres, idem.OrderAdaptive, 4, 0},
		{"mysql", testenv.MySQL, idem.OrderAdaptive, 4, 0},
		// Neither parseTime nor loc=UTC: the layer needs neither.
		{"mysql-any-dsn", mysqlOddDSN, idem.OrderAdaptive, 2, 0},
		{"sqlite-file", testenv.SQLiteFile, idem.OrderAdaptive, 0, 0},
		{"sqlite-memory", testenv.SQLiteMemory, idem.OrderAdaptive, 0, 0},
	}
	for _, r := range []run{runs[0], runs[1], runs[3], runs[4]} {
		r.name, r.batch = r.name+"-batched", 64
		runs = append(runs, r)
	}
	for _, o := range []idem.ReserveOrder{idem.OrderReadFirst, idem.OrderClaimFirst, sqllayer.OrderOneRoundTrip} {
		runs = append(runs,
			run{"postgres-" + orderName(o), testenv.Postgres, o, 2, 0},
			run{"mysql-" + orderName(o), testenv.MySQL, o, 2, 0})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			t.Run(r.name, func(t *testing.T) {
				b := setup(t, r.open(t))
				b.conns = r.conns
				sweeper, _ := b.layer(t)
				storetest.Run(t, storetest.Harness{
					// TestEightInstancesThousandKeys covers a thousand keys
					// on the servers; here fewer keep the run short, above
					// all on SQLite, which is Go code that the race
					// detector slows down tenfold.
					Keys: 150,
					New: func(t *testing.T) idem.Layer {
						l, _ := b.layer(t, sqllayer.WithReserveOrder(r.order), sqllayer.WithBatchSize(r.batch))
						return l
					},
					// The janitor's work, over the run's tables.
					Sweep: func(t *testing.T) {
						if _, err := sweeper.DeleteExpired(ctx(t), 500); err != nil {
							t.Fatalf("DeleteExpired: %v", err)
						}
					},
					// Servers compare microseconds, SQLite milliseconds; a
					// few hundred milliseconds leave room for slow shared
					// machines.
					Tick: 300 * time.Millisecond,
				})
			})
		})
	}
	wg.Wait()
}
