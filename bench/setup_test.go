package bench

import (
	"context"
	"database/sql"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// TestMain names the backends the benchmarks run on, as key: value lines
// that benchstat keeps as the run's configuration.
func TestMain(m *testing.M) {
	redisName, sqlName := "embedded miniredis", "embedded SQLite (WAL, synchronous=NORMAL)"
	if url := os.Getenv(testenv.EnvRedis); url != "" {
		if o, err := redis.ParseURL(url); err == nil {
			redisName = "redis at " + o.Addr
		}
	}
	if dsn := os.Getenv(testenv.EnvPostgres); dsn != "" {
		sqlName = "postgres"
		if u, err := neturl.Parse(dsn); err == nil {
			sqlName = "postgres at " + u.Host + u.Path
		}
	}
	fmt.Printf("redis-backend: %s\nsql-backend: %s\n", redisName, sqlName)
	goleak.VerifyTestMain(m, consumerLeaks...)
}

// redisFor returns a client of the benchmark's Redis — the one named by
// IDEM_REDIS_URL, else an embedded miniredis — and a key prefix of its own.
// Every key under the prefix is deleted when the benchmark ends.
func redisFor(b *testing.B) (*redis.Client, string) {
	b.Helper()
	var o *redis.Options
	if url := os.Getenv(testenv.EnvRedis); url != "" {
		var err error
		if o, err = redis.ParseURL(url); err != nil {
			b.Fatal(err)
		}
	} else {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(m.Close)
		o = &redis.Options{Addr: m.Addr()}
	}
	o.PoolSize = 64
	c := redis.NewClient(o)
	b.Cleanup(func() { _ = c.Close() })
	warmRedis(b, c, o.PoolSize)
	prefix := testenv.Prefix()
	b.Cleanup(func() { sweepRedis(b, c, prefix) })
	return c, prefix
}

// sweepRedis deletes the keys under prefix.
func sweepRedis(b *testing.B, c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				b.Errorf("deleting the benchmark's keys: %v", err)
			}
			batch = batch[:0]
		}
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			flush()
		}
	}
	flush()
	if err := iter.Err(); err != nil {
		b.Errorf("listing the benchmark's keys: %v", err)
	}
}

// dbFor returns a pool over the benchmark's database, with idem's tables
// (their own names) created: the Postgres named by IDEM_POSTGRES_DSN, else a
// SQLite file. records is the records table's name.
func dbFor(b *testing.B) (db *bun.DB, records string) {
	b.Helper()
	var sqldb *sql.DB
	var err error
	if dsn := os.Getenv(testenv.EnvPostgres); dsn != "" {
		if sqldb, err = sql.Open("pgx", dsn); err != nil {
			b.Fatal(err)
		}
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(32)
		db = bun.NewDB(sqldb, pgdialect.New())
		warmSQL(b, sqldb, 32)
	} else {
		path := filepath.Join(b.TempDir(), "bench.db")
		if sqldb, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"); err != nil {
			b.Fatal(err)
		}
		db = bun.NewDB(sqldb, sqlitedialect.New())
	}
	records = testenv.Name("bench_rec")
	events, versions := testenv.Name("bench_evt"), testenv.Name("bench_ver")
	b.Cleanup(func() {
		for _, t := range []string{records, events, versions} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
		_ = db.Close()
	})
	if err := must.Get(sqllayer.New(db, tableOpts(records, events, versions)...))(b).Init(context.Background()); err != nil {
		b.Fatal(err)
	}
	return db, records
}

// warmSQL opens n connections of db's pool before anything is measured, so
// that the first benchmark at many goroutines (a baseline, by the order
// they run in) does not pay for the server processes the others reuse.
func warmSQL(b *testing.B, db *sql.DB, n int) {
	b.Helper()
	ctx := context.Background()
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close() // back to the pool, which keeps n idle
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.PingContext(ctx); err != nil {
			_ = c.Close()
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
}

// warmRedis opens n connections of c's pool, for the reason warmSQL does.
func warmRedis(b *testing.B, c *redis.Client, n int) {
	b.Helper()
	ctx := context.Background()
	conns := make([]*redis.Conn, 0, n)
	defer func() {
		for _, cn := range conns {
			_ = cn.Close() // back to the pool
		}
	}()
	for range n {
		cn := c.Conn()
		if err := cn.Ping(ctx).Err(); err != nil {
			_ = cn.Close()
			b.Fatal(err)
		}
		conns = append(conns, cn)
	}
}

func tableOpts(records, events, versions string) []sqllayer.Option {
	return []sqllayer.Option{sqllayer.WithRecordsTable(records), sqllayer.WithEventsTable(events), sqllayer.WithVersionsTable(versions)}
}

var keySeq atomic.Int64

// freshKey returns a key no benchmark used before.
func freshKey() idem.Key { return idem.NewKey("bench", strconv.FormatInt(keySeq.Add(1), 36)) }

// goroutines are the concurrency levels each operation runs at.
var goroutines = []int{1, 16}

// parallel runs body with n goroutines in total: a plain loop for 1,
// RunParallel with enough parallelism for more.
func parallel(b *testing.B, n int, body func()) {
	b.ReportAllocs()
	if n <= 1 {
		for b.Loop() {
			body()
		}
		return
	}
	b.SetParallelism(max(1, n/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body()
		}
	})
}

func name(op string, n int, impl string) string {
	return "op=" + op + "/goroutines=" + strconv.Itoa(n) + "/impl=" + impl
}

// result is a typical stored result: a small JSON response.
var result = []byte(`{"status":201,"charge_id":"ch_3PqX8d2eZvKYlo2C","amount":4200,"currency":"EUR","customer":"cus_9s8d7f6g","captured":true}`)

// completedKey returns a fresh key that l has claimed and completed with
// result: the key every op=duplicate asks for again.
func completedKey(b *testing.B, l idem.Layer) idem.Key {
	b.Helper()
	ctx := context.Background()
	k := freshKey()
	rec, _, err := l.Reserve(ctx, k, fp, lease, retention)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Complete(ctx, k, rec.Token, result, retention); err != nil {
		b.Fatal(err)
	}
	return k
}

// benchLayer runs the layer benchmarks at each concurrency: op=new, the
// baseline newKey against Reserve and Complete of a fresh key, and
// op=duplicate, the baseline duplicate against Reserve of dup, a completed
// key.
func benchLayer(b *testing.B, l idem.Layer, dup idem.Key, newKey, duplicate func(context.Context) error) {
	ctx := context.Background()
	for _, n := range goroutines {
		b.Run(name("new", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := newKey(ctx); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("new", n, "idem"), func(b *testing.B) {
			parallel(b, n, func() {
				k := freshKey()
				rec, claimed, err := l.Reserve(ctx, k, fp, lease, retention)
				if err != nil || !claimed {
					b.Error(claimed, err)
					return
				}
				if err := l.Complete(ctx, k, rec.Token, result, retention); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("duplicate", n, "baseline"), func(b *testing.B) {
			parallel(b, n, func() {
				if err := duplicate(ctx); err != nil {
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
}
