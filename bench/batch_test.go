package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

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
//	              floor:     (16 and 64 goroutines) the same keys in hand-written
//	                         multi-row statements, four in flight like the layer's
//	                         at most, each as full as n requests can make four
//	                         (claimsFloor): the server's cost of batches of that
//	                         shape, with no queue and no per-caller answer
//	op=duplicate  baseline:  SELECT of the row by primary key
//	              idem:      Reserve on a completed key, batching on
//	op=events100  baseline:  100 MarkProcessed calls in one transaction
//	              idem:      one MarkProcessedBatch of the same 100 events
//	              floor:     one hand-written INSERT of the 100 rows in one
//	                         transaction, which tells nothing of duplicates:
//	                         the server's own cost of 100 new events, the
//	                         most any batch API can gain (baseline ÷ floor)
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
		if n > 1 {
			b.Run(name("new", n, "floor"), newClaimsFloor(db, table, n, token).run)
		}
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
	b.Run(name("events100", 1, "floor"), func(b *testing.B) {
		insert := rawEventsInsert(db, events, perPoll)
		parallel(b, 1, func() {
			ids := poll()
			err := l.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
				_, err := tx.Tx.ExecContext(ctx, insert, rawEventsArgs(db, ids)...)
				return err
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

// rawEventsInsert is the floor of op=events100: the one statement a
// careful engineer would write to insert n events of consumer "bench",
// skipping those that exist, with the retention the layer uses. It reads
// back nothing. On Postgres the IDs travel as one array.
func rawEventsInsert(db *bun.DB, events string, n int) string {
	if db.Dialect().Name() == dialect.PG {
		return `INSERT INTO ` + events + ` (consumer, event_id, created_at, expires_at)
SELECT 'bench', v.id, clock_timestamp(), clock_timestamp() + interval '7 days' FROM unnest($1::text[]) AS v(id)
ON CONFLICT DO NOTHING`
	}
	// SQLite: integer microseconds, as sqllayer stores them.
	var s strings.Builder
	s.WriteString(`INSERT INTO ` + events + ` (consumer, event_id, created_at, expires_at) VALUES `)
	for i := range n {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString("('bench', ?, ?, ?)")
	}
	s.WriteString(" ON CONFLICT DO NOTHING")
	return s.String()
}

// rawEventsArgs are rawEventsInsert's arguments for ids.
func rawEventsArgs(db *bun.DB, ids []string) []any {
	if db.Dialect().Name() == dialect.PG {
		return []any{ids} // pgx encodes a []string as text[]
	}
	now := time.Now().UnixMicro()
	args := make([]any, 0, 3*len(ids))
	for _, id := range ids {
		args = append(args, id, now, now+(7*24*time.Hour).Microseconds())
	}
	return args
}
