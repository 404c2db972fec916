package idempgx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// fixture is a tier on a pgx pool, with its tables and a business table.
type fixture struct {
	pool     *pgxpool.Pool
	sql      *idempgx.Layer
	st       *stacktest.Stack
	payments string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := newPool(t)
	st := stacktest.On(t, "postgres", testenv.AnyRedis(t), testenv.Postgres(t))
	l, err := idempgx.New(pool, tables(st)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f := &fixture{pool: pool, sql: l, st: st, payments: testenv.Name("payment")}
	exec(t, pool, "CREATE TABLE "+f.payments+` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		provider text NOT NULL, external_payment_id text NOT NULL, amount numeric(19,4) NOT NULL,
		UNIQUE (provider, external_payment_id))`)
	t.Cleanup(func() { exec(t, pool, "DROP TABLE IF EXISTS "+f.payments) })
	return f
}

func exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) count(t *testing.T, ext string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+f.payments+" WHERE external_payment_id = $1", ext).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A processed event marked in the team's pgx.Tx commits and rolls back
// with the business row; a second mark in a later transaction is a
// duplicate.
func TestMarkProcessedInPgxTx(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	pay := func(id string, commit bool) (dup bool) {
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		dup, err = f.sql.MarkProcessed(ctx, f.sql.Tx(tx), "payments", id)
		if err != nil {
			t.Fatal(err)
		}
		if dup {
			return true
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', $1, 10)", id); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return false
	}
	if pay("e1", false) {
		t.Fatal("first delivery, rolled back: reported a duplicate")
	}
	if pay("e1", true) {
		t.Fatal("the redelivery after a rollback: reported a duplicate")
	}
	if !pay("e1", true) {
		t.Fatal("a third delivery after the commit: not a duplicate")
	}
	if n := f.count(t, "e1"); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}

	// A batch, in one pgx.Tx.
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dups, err := f.sql.MarkProcessedBatch(ctx, f.sql.Tx(tx), "payments", []string{"e2", "e1", "e3", "e2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, true}; !equal(dups, want) {
		t.Fatalf("batch duplicates %v, want %v", dups, want)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// InTx marks, runs and commits once; an error from fn rolls the mark back.
func TestInTx(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	insert := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'x1', 10)")
		return err
	}
	boom := errors.New("boom")
	if dup, err := f.sql.InTx(ctx, "c", "m1", func(ctx context.Context, tx pgx.Tx) error {
		if err := insert(ctx, tx); err != nil {
			return err
		}
		return boom
	}); dup || !errors.Is(err, boom) {
		t.Fatalf("failing fn: %v, %v; want false, boom", dup, err)
	}
	if n := f.count(t, "x1"); n != 0 {
		t.Fatalf("%d payments after a failed fn, want 0", n)
	}
	for i, want := range []bool{false, true} {
		dup, err := f.sql.InTx(ctx, "c", "m1", insert)
		if err != nil || dup != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i, dup, err, want)
		}
	}
	if n := f.count(t, "x1"); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// Sync versions through a pgx.Tx.
func TestVersionsInPgxTx(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for i, c := range []struct {
		v     int64
		newer bool
	}{{3, true}, {3, false}, {2, false}, {5, true}} {
		newer, err := f.sql.AdvanceVersion(ctx, f.sql.Tx(tx), "crm", "cust-1", c.v)
		if err != nil || newer != c.newer {
			t.Fatalf("step %d: %v, %v; want %v", i, newer, err, c.newer)
		}
	}
	if v, err := f.sql.Version(ctx, f.sql.Tx(tx), "crm", "cust-1"); err != nil || v != 5 {
		t.Fatalf("Version: %d, %v; want 5", v, err)
	}
}

// Bad transactions are refused before anything is written: another
// database's, one committed, one rolled back, one Postgres aborted.
func TestBadTransactions(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	events := func() int {
		var n int
		if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM "+f.st.Events).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("another database", func(t *testing.T) {
		cfg := f.pool.Config().Copy()
		cfg.ConnConfig.Database = "postgres"
		other, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = f.sql.MarkProcessed(ctx, f.sql.Tx(tx), "c", "other-db")
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "tier's pool") {
			t.Fatalf("%v, want idem.ErrConfig naming the pool", err)
		}
	})
	t.Run("nil", func(t *testing.T) {
		if _, err := f.sql.MarkProcessed(ctx, f.sql.Tx(nil), "c", "nil"); !errors.Is(err, idem.ErrConfig) {
			t.Fatalf("%v, want idem.ErrConfig", err)
		}
	})
	for _, end := range []string{"committed", "rolled back"} {
		t.Run(end, func(t *testing.T) {
			tx, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if end == "committed" {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.sql.MarkProcessed(ctx, f.sql.Tx(tx), "c", "ended-"+end)
			if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "committed or rolled back") {
				t.Fatalf("%v, want idem.ErrConfig saying the transaction ended", err)
			}
		})
	}
	t.Run("aborted", func(t *testing.T) {
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "SELECT 1/0"); err == nil {
			t.Fatal("1/0 did not fail")
		}
		_, err = f.sql.MarkProcessed(ctx, f.sql.Tx(tx), "c", "aborted")
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "aborted") {
			t.Fatalf("%v, want idem.ErrConfig saying the transaction is aborted", err)
		}
	})
	if n := events(); n != 0 {
		t.Fatalf("%d processed events written by refused calls, want 0", n)
	}
}

// Money twice: the business's own unique key, hit under a savepoint, leaves
// the pgx.Tx usable, and the handler answers with the existing payment.
func TestSavepointKeepsTheTransaction(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	exec(t, f.pool, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'pay-1', 10)")
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	idemTx := f.sql.Tx(tx)
	err = sqllayer.Savepoint(ctx, idemTx, func(ctx context.Context) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'pay-1', 10)")
		return err
	})
	if !sqllayer.IsUnique(err) {
		t.Fatalf("the second insert: %v, want a unique violation", err)
	}
	var id int64
	if err := tx.QueryRow(ctx, "SELECT id FROM "+f.payments+" WHERE external_payment_id = 'pay-1'").Scan(&id); err != nil {
		t.Fatalf("the transaction after the savepoint: %v", err)
	}
	if dup, err := f.sql.MarkProcessed(ctx, idemTx, "c", "after-savepoint"); err != nil || dup {
		t.Fatalf("idem's mark after the savepoint: %v, %v", dup, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, "pay-1"); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// The atomic mode hands its function a pgx.Tx: sqlc-shaped queries and
// the claim commit together; Commit and Rollback are refused; Begin opens
// a savepoint that a unique violation rolls back alone.
func TestAtomicPgxTx(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	store, err := tiered.New(tiered.WithSQL(f.sql), tiered.WithAtomic(true))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	exec(t, f.pool, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'dup', 10)")
	runs := 0
	work := func(ctx context.Context) ([]byte, error) {
		runs++
		tx, ok := idempgx.TxFrom(ctx)
		if !ok {
			return nil, errors.New("no pgx.Tx in the atomic execution")
		}
		if err := tx.Commit(ctx); !errors.Is(err, idem.ErrConfig) {
			return nil, errors.New("Commit was not refused")
		}
		if err := tx.Rollback(ctx); !errors.Is(err, idem.ErrConfig) {
			return nil, errors.New("Rollback was not refused")
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'a-1', 10)"); err != nil {
			return nil, err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return nil, err
		}
		_, err = sp.Exec(ctx, "INSERT INTO "+f.payments+" (provider, external_payment_id, amount) VALUES ('psp', 'dup', 10)")
		if !sqllayer.IsUnique(err) {
			return nil, errors.New("the savepoint's insert did not hit the unique key")
		}
		if err := sp.Rollback(ctx); err != nil {
			return nil, err
		}
		return []byte("paid"), nil
	}
	key := idem.NewKey("acct", "op-1")
	for i := range 2 {
		res, err := store.Do(ctx, key, "fp", work)
		if err != nil || string(res.Value) != "paid" {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	if runs != 1 {
		t.Fatalf("%d runs, want 1", runs)
	}
	if n := f.count(t, "a-1"); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	if _, ok := idempgx.TxFrom(ctx); ok {
		t.Fatal("TxFrom outside an atomic execution")
	}
}
