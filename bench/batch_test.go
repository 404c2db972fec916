package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// BenchmarkSQLBatch measures the batching of claims and completions and the
// batch API of queue consumers against one-row-per-request statements on
// the same pool and table.
//
//	op=new        baseline:  INSERT … ON CONFLICT DO NOTHING, then UPDATE … WHERE key AND token
//	              idem:      Reserve + Complete of a fresh key, WithBatchSize(64) (on
//	                         Postgres claims and completions share statements)
//	              unbatched: the same without batching (the default)
//	op=duplicate  baseline:  SELECT of the row by primary key
//	              idem:      Reserve on a completed key, batching on
//	op=events100  baseline:  100 MarkProcessed calls in one transaction
//	              idem:      one MarkProcessedBatch of the same 100 events
//
// goroutines=64 exceeds the pool (32 connections): requests queue for a
// connection in the baseline, for a batch in idem.
func BenchmarkSQLBatch(b *testing.B) {
	db, table := dbFor(b)
	events, versions := testenv.Name("e"), testenv.Name("v")
	opts := tableOpts(table, events, versions)
	l := must.Get(sqllayer.New(db, append(opts, sqllayer.WithBatchSize(64))...))(b)
	// Registered after dbFor's, so run before it closes the pool.
	b.Cleanup(func() {
		for _, t := range []string{events, versions} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	})
	if err := l.Init(context.Background()); err != nil {
		b.Fatal(err)
	}
	single := must.Get(sqllayer.New(db, append(opts, sqllayer.WithBatchSize(0))...))(b)
	raw := newRawSQL(db, table)
	token := []byte(idem.NewToken())
	dup := completedKey(b, l)
	ctx := context.Background()
	newKey := func(l *sqllayer.Layer) func() {
		return func() {
			k := freshKey()
			rec, claimed, err := l.Reserve(ctx, k, fp, lease, retention)
			if err != nil || !claimed {
				b.Error(claimed, err)
				return
			}
			if err := l.Complete(ctx, k, rec.Token, result, retention); err != nil {
				b.Error(err)
			}
		}
	}
	for _, n := range []int{1, 16, 64} {
		b.Run(name("new", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := raw.newKey(ctx, freshKey(), token); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("new", n, "idem"), func(b *testing.B) { parallel(b, n, newKey(l)) })
		b.Run(name("new", n, "unbatched"), func(b *testing.B) { parallel(b, n, newKey(single)) })
		b.Run(name("duplicate", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := raw.selectKey(ctx, dup); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("duplicate", n, "idem"), func(b *testing.B) {
			parallel(b, n, func() {
				if rec, _, err := l.Reserve(ctx, dup, fp, lease, retention); err != nil || !rec.Completed() {
					b.Error(rec.State, err)
				}
			})
		})
	}
	const perPoll = 100
	poll := func() []string {
		ids := make([]string, perPoll)
		base := keySeq.Add(perPoll)
		for i := range ids {
			ids[i] = strconv.FormatInt(base-int64(i), 36)
		}
		return ids
	}
	b.Run(name("events100", 1, "baseline"), func(b *testing.B) {
		parallel(b, 1, func() {
			ids := poll()
			err := l.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				for _, id := range ids {
					if _, err := l.MarkProcessed(ctx, tx, "bench", id); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Error(err)
			}
		})
		b.ReportMetric(float64(perPoll*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run(name("events100", 1, "idem"), func(b *testing.B) {
		parallel(b, 1, func() {
			ids := poll()
			err := l.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				_, err := l.MarkProcessedBatch(ctx, tx, "bench", ids)
				return err
			})
			if err != nil {
				b.Error(err)
			}
		})
		b.ReportMetric(float64(perPoll*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
