package sqllayer_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// The benchmarks run on the real Postgres only (they skip without it). Each
// runs the layer and a hand-written reference of the same work through the
// same *bun.DB pool (the driver's own $N arguments, as the layer sends
// them), at 1 and 16 goroutines. Besides time they report cpu-µs/op and
// srv-µs/op (see cpuMeter), steadier than time on a shared machine. Compare
// runs with benchstat.

// benchApp is the application_name of the benchmarks' pool, by which the
// processor time of the backends that serve it is found.
var benchApp string

// benchDB opens one pgx pool of 16 connections with fresh tables, and
// returns it with a Layer in the default order (idem.OrderAdaptive), one in the
// sqllayer.OrderOneRoundTrip order, and the records table.
func benchDB(b *testing.B) (*bun.DB, *sqllayer.Layer, *sqllayer.Layer, string) {
	b.Helper()
	dsn, err := testenv.PostgresDSN()
	if err != nil {
		b.Skipf("postgres unavailable: %v", err)
	}
	benchApp = testenv.Name("idembench")
	pg := testenv.WithApplicationName(b, &testenv.SQL{Kind: "postgres", DSN: dsn, Real: true}, benchApp)
	sqldb, err := sql.Open("pgx", pg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	sqldb.SetMaxOpenConns(16)
	sqldb.SetMaxIdleConns(16)
	db := bun.NewDB(sqldb, pgdialect.New())
	names := [3]string{testenv.Name("bench_rec"), testenv.Name("bench_evt"), testenv.Name("bench_ver")}
	b.Cleanup(func() {
		for _, n := range names {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+n)
		}
		_ = db.Close()
	})
	opts := []sqllayer.Option{sqllayer.WithRecordsTable(names[0]), sqllayer.WithEventsTable(names[1]), sqllayer.WithVersionsTable(names[2])}
	l := must.Get(sqllayer.New(db, opts...))(b)
	if err := l.Init(context.Background()); err != nil {
		b.Fatal(err)
	}
	return db, l, must.Get(sqllayer.New(db, append(opts, sqllayer.WithReserveOrder(sqllayer.OrderOneRoundTrip))...))(b), names[0]
}

// parallel runs body at g goroutines: a plain loop for 1, RunParallel with
// enough parallelism for g otherwise. Besides time it reports cpu-µs/op,
// the processor time this process and the Postgres backends serving it
// spent per operation, which other load on a shared machine disturbs far
// less than wall time (reported when the server's processes are readable).
func parallel(b *testing.B, g int, body func(i int64)) {
	b.ReportAllocs()
	var n atomic.Int64
	cpu := startCPU(b)
	defer cpu.stop(b)
	if g == 1 {
		for b.Loop() {
			body(n.Add(1))
		}
		return
	}
	b.SetParallelism((g + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body(n.Add(1))
		}
	})
}

func newKey(scope string, i int64) idem.Key { return idem.NewKey(scope, fmt.Sprint(i)) }

// BenchmarkReserveCompleteNewKey measures a whole first request on Postgres:
// Reserve on a key never seen, then Complete with a 64-byte result.
// "layer" is the Layer (idem.OrderAdaptive: on new keys it inserts first);
// "one-statement" is a Layer in the sqllayer.OrderOneRoundTrip order (the claim-or-read
// statement); "batched" is a Layer with WithBatchSize(64); "baseline" runs the two
// statements such a request cannot do without, INSERT … ON CONFLICT DO
// NOTHING and UPDATE … WHERE key AND token, on the same pool. At 64
// goroutines requests queue for the pool's 16 connections, or for a batch.
func BenchmarkReserveCompleteNewKey(b *testing.B) {
	db, l, lc, table := benchDB(b)
	lb := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(table), sqllayer.WithBatchSize(64)))(b)
	result := make([]byte, 64)
	insert := "INSERT INTO " + table + ` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 1, $5, now() + interval '30 seconds', now(), now() + interval '24 hours')
		ON CONFLICT (key_digest) DO NOTHING`
	update := "UPDATE " + table + ` SET state = 2, result = $3, lease_until = NULL, expires_at = now() + interval '24 hours'
		WHERE key_digest = $1 AND token = $2 AND state = 1`
	for _, g := range []int{1, 16, 64} {
		for _, v := range []struct {
			name string
			l    *sqllayer.Layer
		}{{"one-statement", lc}, {"batched", lb}, {"layer", l}} {
			b.Run(fmt.Sprintf("%s/g=%d", v.name, g), func(b *testing.B) {
				scope := testenv.Name("l")
				parallel(b, g, func(i int64) {
					k := newKey(scope, i)
					rec, claimed, err := v.l.Reserve(context.Background(), k, "fp", 30*time.Second, 24*time.Hour)
					if err != nil || !claimed {
						b.Fatal(claimed, err)
					}
					if err := v.l.Complete(context.Background(), k, rec.Token, result, 24*time.Hour); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
		b.Run(fmt.Sprintf("baseline/g=%d", g), func(b *testing.B) {
			scope := testenv.Name("b")
			parallel(b, g, func(i int64) {
				k := newKey(scope, i)
				d := k.Digest()
				token := []byte(idem.NewToken())
				res, err := db.DB.ExecContext(context.Background(), insert, d[:], k.Scope(), k.ClientKey(), []byte("fp"), token)
				if n, _ := res.RowsAffected(); err != nil || n != 1 {
					b.Fatal(n, err)
				}
				res, err = db.DB.ExecContext(context.Background(), update, d[:], token, result)
				if n, _ := res.RowsAffected(); err != nil || n != 1 {
					b.Fatal(n, err)
				}
			})
		})
	}
}

// BenchmarkReserveCompletedKey measures a duplicate on Postgres: Reserve on
// one of 1,000 completed keys, which returns the stored 64-byte result.
// "layer" is the Layer (idem.OrderAdaptive: on duplicates it reads first, one
// SELECT); "one-statement" is a Layer in the sqllayer.OrderOneRoundTrip order (the
// claim-or-read statement); "select" is a raw primary-key SELECT of the
// same row on the same pool, the least a duplicate can cost; "select-bun" is
// that
// SELECT through bun's query formatting (arguments inlined into the text),
// which pgx's default mode prepares anew for every distinct text.
func BenchmarkReserveCompletedKey(b *testing.B) {
	db, l, lc, table := benchDB(b)
	const keys = 1000
	scope := testenv.Name("done")
	result := make([]byte, 64)
	_, _ = rand.Read(result)
	for i := range int64(keys) {
		k := newKey(scope, i)
		rec, _, err := l.Reserve(context.Background(), k, "fp", 30*time.Second, 24*time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Complete(context.Background(), k, rec.Token, result, 24*time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	query := "SELECT fingerprint, state, result, lease_until, expires_at FROM " + table + " WHERE key_digest = "
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("one-statement/g=%d", g), func(b *testing.B) {
			parallel(b, g, func(i int64) {
				rec, claimed, err := lc.Reserve(context.Background(), newKey(scope, i%keys), "fp", 30*time.Second, 24*time.Hour)
				if err != nil || claimed || len(rec.Result) != len(result) {
					b.Fatal(claimed, err)
				}
			})
		})
		b.Run(fmt.Sprintf("layer/g=%d", g), func(b *testing.B) {
			parallel(b, g, func(i int64) {
				rec, claimed, err := l.Reserve(context.Background(), newKey(scope, i%keys), "fp", 30*time.Second, 24*time.Hour)
				if err != nil || claimed || len(rec.Result) != len(result) {
					b.Fatal(claimed, err)
				}
			})
		})
		b.Run(fmt.Sprintf("select/g=%d", g), func(b *testing.B) {
			parallel(b, g, func(i int64) {
				d := newKey(scope, i%keys).Digest()
				var (
					fp, res    []byte
					state      int
					lease, exp sql.NullTime
				)
				if err := db.DB.QueryRowContext(context.Background(), query+"$1", d[:]).Scan(&fp, &state, &res, &lease, &exp); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("select-bun/g=%d", g), func(b *testing.B) {
			parallel(b, g, func(i int64) {
				d := newKey(scope, i%keys).Digest()
				var (
					fp, res    []byte
					state      int
					lease, exp sql.NullTime
				)
				if err := db.QueryRowContext(context.Background(), query+"?", d[:]).Scan(&fp, &state, &res, &lease, &exp); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
