package bench

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// BenchmarkInTx puts idem's in-transaction APIs in each transaction type a
// team holds, on the same database, at each concurrency: every op begins a
// transaction, writes idem's row in it and commits.
//
//	op=mark       MarkProcessed of a new event
//	op=complete   CompleteTx of a key claimed just before (the claim, on the pool, is part of the op)
//
//	impl=bun      a bun.Tx (bun's RunInTx), the path the in-transaction APIs had alone
//	impl=sqltx    a *sql.Tx begun on the same *sql.DB (sqlc's database/sql mode, sqlx)
//	impl=pgx      a pgx.Tx of a pgxpool on the same server (idempgx's Layer.Tx), Postgres only
func BenchmarkInTx(b *testing.B) {
	db, records := dbFor(b)
	events, versions := testenv.Name("bench_evt"), testenv.Name("bench_ver")
	opts := tableOpts(records, events, versions)
	l := must.Get(sqllayer.New(db, opts...))(b)
	ctx := context.Background()
	if err := l.Init(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, t := range []string{events, versions} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	})
	var pl *idempgx.Layer
	var pool *pgxpool.Pool
	if dsn := os.Getenv(testenv.EnvPostgres); dsn != "" {
		cfg := must.Get(pgxpool.ParseConfig(dsn))(b)
		cfg.MaxConns = 32
		pool = must.Get(pgxpool.NewWithConfig(ctx, cfg))(b)
		b.Cleanup(pool.Close)
		// Its connections open before anything is measured, as warmSQL
		// opens the *sql.DB's.
		conns := make([]*pgxpool.Conn, 0, cfg.MaxConns)
		for range cfg.MaxConns {
			conns = append(conns, must.Get(pool.Acquire(ctx))(b))
		}
		for _, c := range conns {
			c.Release()
		}
		pl = must.Get(idempgx.New(pool, opts...))(b)
		b.Cleanup(func() { _ = pl.Close() })
	}
	var seq atomic.Int64
	id := func() string { return "ev-" + strconv.FormatInt(seq.Add(1), 36) }

	// in runs fn in a new transaction of impl's type and commits it.
	in := map[string]func(fn func(ctx context.Context, tx sqllayer.Tx) error) error{
		"bun": func(fn func(ctx context.Context, tx sqllayer.Tx) error) error {
			return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
		},
		"sqltx": func(fn func(ctx context.Context, tx sqllayer.Tx) error) error {
			tx, err := db.DB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := fn(ctx, tx); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
	}
	impls := []string{"bun", "sqltx"}
	if pool != nil {
		in["pgx"] = func(fn func(ctx context.Context, tx sqllayer.Tx) error) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			if err := fn(ctx, pl.Tx(tx)); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Commit(ctx)
		}
		impls = append(impls, "pgx")
	}
	for _, n := range goroutines {
		for _, impl := range impls {
			run := in[impl]
			b.Run(name("mark", n, impl), func(b *testing.B) {
				parallel(b, n, func() {
					err := run(func(ctx context.Context, tx sqllayer.Tx) error {
						_, err := l.MarkProcessed(ctx, tx, "bench", id())
						return err
					})
					if err != nil {
						b.Error(err)
					}
				})
			})
		}
		for _, impl := range impls {
			run := in[impl]
			b.Run(name("complete", n, impl), func(b *testing.B) {
				parallel(b, n, func() {
					k := freshKey()
					rec, claimed, err := l.Reserve(ctx, k, fp, lease, retention)
					if err != nil || !claimed {
						b.Error(claimed, err)
						return
					}
					err = run(func(ctx context.Context, tx sqllayer.Tx) error {
						return l.CompleteTx(ctx, tx, k, rec.Token, result, retention)
					})
					if err != nil {
						b.Error(err)
					}
				})
			})
		}
	}
}
