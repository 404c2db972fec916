package bench

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// BenchmarkPayment puts a payment handler — one row inserted in a
// transaction — behind each way of guarding it, next to the same handler
// with no idempotency at all, on the same pool, at each concurrency. Every
// op is a first execution (a fresh key).
//
//	impl=bare               BEGIN; INSERT the charge; COMMIT
//	impl=atomic-sql         Store.Do, SQL only, WithAtomic: BEGIN; INSERT the claim; INSERT the charge;
//	                        UPDATE the claim to completed; COMMIT
//	impl=atomic-redis       the same with Redis in front (its claim before, its completion after, off the caller's time)
//	impl=reservation-sql    Store.Do, SQL only, the handler's own transaction completing its reservation:
//	                        the claim commits on its own, then the handler's transaction, then a read back
//	impl=floor              the least any claim inside the handler's transaction costs over database/sql,
//	                        by hand: BEGIN; INSERT the claim … ON CONFLICT DO NOTHING; INSERT the charge;
//	                        UPDATE the claim with the result; COMMIT (database/sql sends BEGIN and COMMIT
//	                        as statements of their own)
func BenchmarkPayment(b *testing.B) {
	db, records := dbFor(b)
	rdb, prefix := redisFor(b)
	sqlLayer := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(records)))(b)
	store := func(b *testing.B, withRedis bool, opts ...tiered.Option) *tiered.Store {
		base := []tiered.Option{tiered.WithSQL(sqlLayer), tiered.WithRetention(retention),
			tiered.WithTimeouts(2*time.Second, 10*time.Second), tiered.WithLocalCache(0, 0, 0)}
		if withRedis {
			rl := must.Get(redislayer.New(rdb, redislayer.WithPrefix(prefix), redislayer.WithTimeout(2*time.Second)))(b)
			b.Cleanup(func() { _ = rl.Close() })
			base = append(base, tiered.WithRedis(rl))
		}
		s := must.Get(tiered.New(append(base, opts...)...))(b)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	charges := testenv.Name("bench_charges")
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+charges+" (id VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+charges) })
	claims := testenv.Name("bench_claims")
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+claims+" (id VARCHAR(64) PRIMARY KEY, token BYTEA NOT NULL, result BYTEA)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+claims) })
	insert := "INSERT INTO " + charges + " (id, amount) VALUES (?, 4200)"
	claim := "INSERT INTO " + claims + " (id, token) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"
	complete := "UPDATE " + claims + " SET result = ? WHERE id = ? AND token = ?"
	// The atomic execution's transaction is a *sql.Tx, which takes the
	// driver's own placeholders; a bun.Tx formats ? itself.
	insertPG := strings.Replace(insert, "?", "$1", 1)
	charge := func(ctx context.Context, tx sqllayer.Tx, id string) error {
		q := insert
		if _, plain := tx.(*sql.Tx); plain {
			q = insertPG
		}
		_, err := tx.ExecContext(ctx, q, id)
		return err
	}
	atomicWork := func(id string) tiered.Func {
		return func(ctx context.Context) ([]byte, error) {
			tx, ok := sqllayer.TxFrom(ctx)
			if !ok {
				return nil, errors.New("no transaction")
			}
			return result, charge(ctx, tx, id)
		}
	}
	for _, n := range goroutines {
		b.Run(name("payment", n, "bare"), func(b *testing.B) {
			parallel(b, n, func() {
				id := freshKey().ClientKey()
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return charge(ctx, tx, id) })
				if err != nil {
					b.Error(err)
				}
			})
		})
		for _, impl := range []struct {
			name  string
			redis bool
		}{{"atomic-sql", false}, {"atomic-redis", true}} {
			b.Run(name("payment", n, impl.name), func(b *testing.B) {
				s := store(b, impl.redis, tiered.WithAtomic(true))
				parallel(b, n, func() {
					k := freshKey()
					if _, err := s.Do(ctx, k, fp, atomicWork(k.ClientKey())); err != nil {
						b.Error(err)
					}
				})
			})
		}
		b.Run(name("payment", n, "floor"), func(b *testing.B) {
			parallel(b, n, func() {
				id, token := freshKey().ClientKey(), []byte(idem.NewToken())
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					if r, err := tx.ExecContext(ctx, claim, id, token); err != nil {
						return err
					} else if n, _ := r.RowsAffected(); n != 1 {
						return errors.New("floor: the key is taken")
					}
					if err := charge(ctx, tx, id); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, complete, result, id, token)
					return err
				})
				if err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(name("payment", n, "reservation-sql"), func(b *testing.B) {
			s := store(b, false)
			parallel(b, n, func() {
				k := freshKey()
				_, err := s.Do(ctx, k, fp, func(ctx context.Context) ([]byte, error) {
					res, _ := idem.ReservationFrom(ctx)
					return result, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
						if err := charge(ctx, tx, k.ClientKey()); err != nil {
							return err
						}
						return sqlLayer.CompleteReservation(ctx, tx, res, result)
					})
				})
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}
