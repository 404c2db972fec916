package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
)

// sweptRows is how many expired rows BenchmarkJanitor sweeps.
const sweptRows = 100_000

// BenchmarkJanitor measures what a sweep of 100,000 expired rows costs the
// claims that run beside it: 16 goroutines claim and complete fresh keys
// (Reserve + Complete on one sqllayer.Layer) for a window, with the table
// holding 100,000 expired rows, and report the window's claims/s and the
// 99th percentile of a claim's time (p99-ms):
//
//	impl=none     no sweep: the rows stay; a window of 5 s
//	impl=unpaced  a Janitor that deletes without pausing, 500 rows a
//	              statement after a first 100, 200 and 400
//	              (WithDutyCycle(1), WithStatementTime(1h): the janitor
//	              before pacing, near enough); the window is the sweep
//	impl=paced    a Janitor with the default pace; the window is the sweep,
//	              at most 10 s (the sweep is then cancelled)
//
// One op is one window, so run it with -benchtime 1x and -count 1 in a
// loop: each run seeds the rows afresh. sweep-s is the sweep's time,
// swept-rows the rows it deleted in the window. On IDEM_POSTGRES_DSN's
// Postgres, else on SQLite.
func BenchmarkJanitor(b *testing.B) {
	db, records := dbFor(b)
	ctx := context.Background()
	l := must.Get(sqllayer.New(db, tableOpts(records, records+"_e", records+"_v")...))(b)
	b.Cleanup(func() {
		for _, t := range []string{records + "_e", records + "_v"} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	})
	if err := l.Init(ctx); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		impl   string
		opts   []janitor.Option
		window time.Duration
	}{
		{"none", nil, 5 * time.Second},
		{"unpaced", []janitor.Option{janitor.WithBatch(500), janitor.WithDutyCycle(1), janitor.WithStatementTime(time.Hour)}, 0},
		{"paced", nil, 10 * time.Second},
	} {
		b.Run("op=claims-during-sweep/goroutines=16/impl="+c.impl, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if _, err := db.ExecContext(ctx, "DELETE FROM "+records); err != nil {
					b.Fatal(err)
				}
				seedExpired(b, db, records, sweptRows)
				b.StartTimer()
				claimsDuringSweep(b, l, c.opts, c.impl != "none", c.window)
			}
		})
	}
}

// seedExpired inserts n expired, completed records into table in one
// statement.
func seedExpired(b *testing.B, db *bun.DB, table string, n int) {
	b.Helper()
	cols := "(key_digest, scope, client_key, fingerprint, state, token, result, lease_until, created_at, expires_at)"
	var q string
	if db.Dialect().Name() == dialect.PG {
		q = "INSERT INTO " + table + " " + cols + ` SELECT sha256(('swept:' || g || ':' || clock_timestamp())::bytea), '', '', 'fp'::bytea, 2,
	'token'::bytea, 'result'::bytea, NULL, clock_timestamp() - interval '2 hours', clock_timestamp() - interval '1 hour'
	FROM generate_series(1, ?) g`
	} else {
		q = "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) INSERT INTO " + table + " " + cols +
			` SELECT randomblob(32), '', '', x'6670', 2, x'746f6b656e', x'726573756c74', NULL,
	(unixepoch('subsec') - 7200) * 1000000, (unixepoch('subsec') - 3600) * 1000000 FROM g`
	}
	if _, err := db.ExecContext(context.Background(), q, n); err != nil {
		b.Fatal(err)
	}
	if db.Dialect().Name() == dialect.PG {
		if _, err := db.ExecContext(context.Background(), "ANALYZE "+table); err != nil {
			b.Fatal(err)
		}
	}
}

// claimsDuringSweep runs 16 goroutines of claims (Reserve and Complete of
// fresh keys) for the window, or, with sweep, while a Janitor of opts
// sweeps (at most the window when it is set), and reports claims/s and the
// p99 of a claim.
func claimsDuringSweep(b *testing.B, l *sqllayer.Layer, opts []janitor.Option, sweep bool, window time.Duration) {
	ctx := context.Background()
	stop := make(chan struct{})
	var swept int64
	var sweepTook time.Duration
	var sweepDone sync.WaitGroup
	start := time.Now()
	if sweep {
		j := must.Get(janitor.New(l, opts...))(b)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if window > 0 {
			time.AfterFunc(window, cancel)
		}
		sweepDone.Go(func() {
			defer close(stop)
			n, _, err := j.Sweep(sctx)
			swept, sweepTook = n, time.Since(start)
			if err != nil && !errors.Is(err, context.Canceled) {
				b.Error(err)
			}
		})
	} else {
		time.AfterFunc(window, func() { close(stop) })
	}
	const n = 16
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := freshKey()
				t := time.Now()
				rec, claimed, err := l.Reserve(ctx, k, fp, lease, retention)
				if err == nil && claimed {
					err = l.Complete(ctx, k, rec.Token, result, retention)
				}
				if err != nil || !claimed {
					b.Error(claimed, err)
					return
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	sweepDone.Wait()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		b.Fatal("no claim completed")
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/took.Seconds(), "claims/s")
	b.ReportMetric(float64(all[len(all)*99/100])/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1])/float64(time.Millisecond), "max-ms")
	if sweep {
		b.ReportMetric(sweepTook.Seconds(), "sweep-s")
		b.ReportMetric(float64(swept), "swept-rows")
	}
}
