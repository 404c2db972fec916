package sqllayer_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// paymentsTable creates a business table with the team's own unique key,
// (provider, external_payment_id), holding one payment, and drops it when
// the test ends.
func paymentsTable(t *testing.T, db *bun.DB) string {
	t.Helper()
	name := testenv.Name("payment")
	if _, err := db.ExecContext(ctx(t), "CREATE TABLE "+name+` (provider varchar(64) NOT NULL,
		external_payment_id varchar(64) NOT NULL, amount integer NOT NULL,
		UNIQUE (provider, external_payment_id))`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(c, "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	if _, err := db.ExecContext(ctx(t), "INSERT INTO "+name+" VALUES ('psp', 'pay-1', 10)"); err != nil {
		t.Fatal(err)
	}
	return name
}

// txKind is a caller's transaction of one type, and how its own
// statements are written in it.
type txKind struct {
	name  string
	begin func(t *testing.T, db *bun.DB) (tx sqllayer.Tx, commit, rollback func() error)
	// bind rewrites a statement with ? placeholders for the transaction.
	bind func(kind, query string) string
}

var txKinds = []txKind{
	{
		name: "*sql.Tx",
		begin: func(t *testing.T, db *bun.DB) (sqllayer.Tx, func() error, func() error) {
			tx, err := db.DB.BeginTx(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, tx.Commit, tx.Rollback
		},
		bind: func(kind, query string) string {
			if kind != "postgres" {
				return query
			}
			for i := 1; strings.Contains(query, "?"); i++ {
				query = strings.Replace(query, "?", "$"+string(rune('0'+i)), 1)
			}
			return query
		},
	},
	{
		name: "bun.Tx",
		begin: func(t *testing.T, db *bun.DB) (sqllayer.Tx, func() error, func() error) {
			tx, err := db.BeginTx(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx, tx.Commit, tx.Rollback
		},
		bind: func(_, query string) string { return query }, // bun formats ? itself
	},
}

// reserveHeld claims a fresh key on l and returns its reservation, as the
// Store hands it to the handler.
func reserveHeld(t *testing.T, l *sqllayer.Layer) (idem.Key, *idem.Reservation) {
	t.Helper()
	k := idem.NewKey("tenant", testenv.Name("sp"))
	rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
	if err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	resCtx, _ := reservation.NewContext(ctx(t), l, rec, time.Hour)
	res, _ := idem.ReservationFrom(resCtx)
	return k, res
}

// The double protection for money on every database and transaction type:
// a handler's insert that hits its own unique key under a Savepoint fails
// with an error IsUnique recognizes, the transaction goes on (the earlier
// write kept, the existing payment read), and idem's completion in it
// commits with the rest.
func TestSavepointKeepsTheTransaction(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		for _, kind := range txKinds {
			t.Run(kind.name, func(t *testing.T) {
				l, db := setup(t, s).layer(t)
				payments := paymentsTable(t, db)
				k, res := reserveHeld(t, l)
				tx, commit, rollback := kind.begin(t, db)
				defer func() { _ = rollback() }()
				c := ctx(t)
				if _, err := tx.ExecContext(c, kind.bind(s.Kind, "INSERT INTO "+payments+" VALUES (?, ?, ?)"), "psp", "pay-2", 20); err != nil {
					t.Fatal(err)
				}
				err := sqllayer.Savepoint(c, tx, func(ctx context.Context) error {
					_, err := tx.ExecContext(ctx, kind.bind(s.Kind, "INSERT INTO "+payments+" VALUES (?, ?, ?)"), "psp", "pay-1", 99)
					return err
				})
				if err == nil || !sqllayer.IsUnique(err) {
					t.Fatalf("the second insert of pay-1: %v; want a unique violation", err)
				}
				rows, err := tx.QueryContext(c, kind.bind(s.Kind, "SELECT amount FROM "+payments+" WHERE provider = ? AND external_payment_id = ?"), "psp", "pay-1")
				if err != nil {
					t.Fatalf("reading the existing payment after the savepoint: %v", err)
				}
				var amount int
				if !rows.Next() {
					t.Fatalf("no existing payment: %v", rows.Err())
				}
				if err := rows.Scan(&amount); err != nil {
					t.Fatal(err)
				}
				_ = rows.Close()
				if amount != 10 {
					t.Fatalf("existing amount %d, want 10", amount)
				}
				if err := l.CompleteReservation(c, tx, res, []byte(`{"amount":10}`)); err != nil {
					t.Fatalf("completion after the savepoint: %v", err)
				}
				if err := commit(); err != nil {
					t.Fatal(err)
				}
				if got, err := l.Get(c, k); err != nil || !got.Completed() || string(got.Result) != `{"amount":10}` {
					t.Fatalf("after the commit: %+v %v", got, err)
				}
				var n int
				if err := db.QueryRowContext(c, "SELECT count(*) FROM "+payments).Scan(&n); err != nil || n != 2 {
					t.Fatalf("%d payments, %v; want pay-1 and pay-2", n, err)
				}
			})
		}
	})
}

// A savepoint whose function succeeds keeps its writes; Savepoint on an
// ended transaction says so, with idem.ErrConfig.
func TestSavepointReleaseAndEndedTx(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		_, db := setup(t, s).layer(t)
		payments := paymentsTable(t, db)
		tx, err := db.DB.BeginTx(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		insert := txKinds[0].bind(s.Kind, "INSERT INTO "+payments+" VALUES (?, ?, ?)")
		if err := sqllayer.Savepoint(ctx(t), tx, func(ctx context.Context) error {
			_, err := tx.ExecContext(ctx, insert, "psp", "pay-3", 30)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx(t), "SELECT count(*) FROM "+payments).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d payments, %v; want the released savepoint's row kept", n, err)
		}
		ran := false
		err = sqllayer.Savepoint(ctx(t), tx, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, idem.ErrConfig) || !errors.Is(err, sql.ErrTxDone) || ran {
			t.Fatalf("Savepoint on a committed transaction: %v (ran %v); want ErrConfig, sql.ErrTxDone, fn not run", err, ran)
		}
	})
}

// Without the savepoint the databases part ways. MariaDB and SQLite undo
// the failed statement alone: the completion after it commits. Postgres
// aborts the transaction: the completion is refused with the error that
// names the aborted transaction and the savepoint, wrapping
// idem.ErrConfig, and nothing commits.
func TestUniqueHitWithoutSavepoint(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		l, db := setup(t, s).layer(t)
		payments := paymentsTable(t, db)
		k, res := reserveHeld(t, l)
		c := ctx(t)
		tx, err := db.DB.BeginTx(c, nil) // on Postgres, a *sql.Tx of pgx's stdlib driver
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		_, err = tx.ExecContext(c, txKinds[0].bind(s.Kind, "INSERT INTO "+payments+" VALUES (?, ?, ?)"), "psp", "pay-1", 99)
		if !sqllayer.IsUnique(err) {
			t.Fatalf("the second insert of pay-1: %v; want a unique violation", err)
		}
		err = l.CompleteReservation(c, tx, res, []byte("done"))
		if s.Kind != "postgres" {
			if err != nil {
				t.Fatalf("completion after the failed statement: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if got, err := l.Get(c, k); err != nil || !got.Completed() {
				t.Fatalf("after the commit: %+v %v", got, err)
			}
			return
		}
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "aborted") || !strings.Contains(err.Error(), "Savepoint") {
			t.Fatalf("completion in the aborted transaction: %v; want ErrConfig naming the aborted transaction and Savepoint", err)
		}
		_ = tx.Rollback()
		if got, err := l.Get(c, k); err != nil || got.Completed() {
			t.Fatalf("after the refused completion: %+v %v; want the key still in progress", got, err)
		}
	})
}
