package sqllayer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestMarkProcessedBatchOverlappingBatches: sixteen consumers over four
// Layers mark overlapping batches of the same new events, each batch in
// its own order with a repeat in it, all at once, round after round. The
// batches take their rows in one order, so none deadlocks on Postgres or
// SQLite (a deadlock would give ErrConflict: the transactions are the
// test's own, without RunInTx's retries): each event is reported new to
// exactly one batch and a duplicate to every other.
func TestMarkProcessedBatchOverlappingBatches(t *testing.T) {
	allSQLAtOnce(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		b.conns = 4 // one transaction per goroutine, sixteen in all
		const layers, goroutines, events, perBatch = 4, 16, 48, 24
		rounds := 12
		if !b.sql.Real {
			rounds = 3 // SQLite is Go code, which the race detector slows tenfold
		}
		consumer := testenv.Name("consumer")
		ls := make([]*sqllayer.Layer, layers)
		dbs := make([]*bun.DB, layers)
		for i := range ls {
			ls[i], dbs[i] = b.layer(t, sqllayer.WithRetries(50))
		}
		// mark runs one batch in a transaction of the test's own, without
		// retries: a deadlock is the test's failure. MySQL still meets one
		// when a batch's INSERT fails on an event another transaction
		// inserted meanwhile (the failed statement keeps its locks, and the
		// retry of the batch's other events goes back below them): there
		// the transaction is retried as RunInTx retries it, and only the
		// outcome is checked.
		var conflicts atomic.Int64
		mark := func(c context.Context, i int, batch []string) (dups []bool, err error) {
			if s.Kind == "mysql" {
				err = ls[i].RunInTx(c, func(c context.Context, tx bun.Tx) error {
					conflicts.Add(1)
					dups, err = ls[i].MarkProcessedBatch(c, tx, consumer, batch)
					return err
				})
				conflicts.Add(-1)
				return dups, err
			}
			tx, err := dbs[i].BeginTx(c, nil)
			if err != nil {
				return nil, err
			}
			if dups, err = ls[i].MarkProcessedBatch(c, tx, consumer, batch); err != nil {
				_ = tx.Rollback()
				return nil, fmt.Errorf("MarkProcessedBatch: %w", err)
			}
			return dups, tx.Commit()
		}
		// A failure, not a measurement: deadlocks end in about a second
		// each, and a hang ends here.
		c, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		for round := range rounds {
			ids := make([]string, events)
			for i := range ids {
				ids[i] = fmt.Sprintf("r%02d-e%02d", round, i)
			}
			var (
				mu      sync.Mutex
				news    = map[string]int{}
				picked  = map[string]bool{}
				entries int
				dupSeen int
			)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					batch := append([]string(nil), ids...)
					rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
					batch = batch[:perBatch]
					batch = append(batch, batch[rand.IntN(perBatch)]) // a repeat
					rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
					<-start
					dups, err := mark(c, g%layers, batch)
					if err != nil {
						t.Errorf("round %d: %v (ErrConflict: %v)", round, err, errors.Is(err, sqllayer.ErrConflict))
						return
					}
					mu.Lock()
					defer mu.Unlock()
					entries += len(batch)
					for i, id := range batch {
						picked[id] = true
						if dups[i] {
							dupSeen++
						} else {
							news[id]++
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if t.Failed() {
				return
			}
			for id := range picked {
				if news[id] != 1 {
					t.Errorf("round %d: %s reported new %d times, want once", round, id, news[id])
				}
			}
			if want := entries - len(picked); dupSeen != want {
				t.Errorf("round %d: %d duplicates reported, want %d (every entry but the first of each event)", round, dupSeen, want)
			}
		}
		if n := conflicts.Load(); n > 0 {
			t.Logf("%d retries of a transaction after a conflict", n)
		}
	})
}
