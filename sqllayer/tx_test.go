package sqllayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// A completion in a *sql.Tx of another database that holds tables of the
// same names finds no record of the key: the error says which mistake it
// likely is, and nothing is written in either database.
func TestCompleteReservationOtherDatabase(t *testing.T) {
	s := testenv.Postgres(t)
	db := s.Open(t)
	records, events, versions := testenv.Name("idem_rec"), testenv.Name("idem_evt"), testenv.Name("idem_ver")
	opts := []sqllayer.Option{sqllayer.WithRecordsTable(records), sqllayer.WithEventsTable(events), sqllayer.WithVersionsTable(versions)}
	l, err := sqllayer.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "postgres" // another database of the same server
	other := bun.NewDB(stdlib.OpenDB(*cfg), pgdialect.New())
	t.Cleanup(func() { _ = other.Close() })
	ol, err := sqllayer.New(other, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*sqllayer.Layer{l, ol} {
		if err := x.Init(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []*bun.DB{db, other} {
			for _, table := range []string{records, events, versions} {
				_, _ = d.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
			}
		}
	})
	k := idem.NewKey("tenant", testenv.Name("k"))
	rec, claimed, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
	if err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	resCtx, _ := reservation.NewContext(t.Context(), l, rec, time.Hour)
	res, _ := idem.ReservationFrom(resCtx)
	tx, err := other.DB.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	err = l.CompleteReservation(resCtx, tx, res, []byte("paid"))
	if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "another database") {
		t.Fatalf("%v, want idem.ErrConfig naming another database", err)
	}
	if got, err := l.Get(t.Context(), k); err != nil || got.State != idem.StateInProgress {
		t.Fatalf("the tier's record: %+v, %v; want it in progress", got, err)
	}
}

// A *sql.Tx already committed, and a Postgres transaction aborted by a
// failed statement, are refused with errors that say so.
func TestEndedAndAbortedSQLTx(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		tx, err := db.DB.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		_, err = l.MarkProcessed(t.Context(), tx, "c", "ended")
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "committed or rolled back") {
			t.Fatalf("an ended *sql.Tx: %v, want idem.ErrConfig", err)
		}
		if s.Kind != "postgres" {
			return
		}
		tx, err = db.DB.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(t.Context(), "SELECT 1/0"); err == nil {
			t.Fatal("1/0 did not fail")
		}
		_, err = l.MarkProcessed(t.Context(), tx, "c", "aborted")
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "aborted") {
			t.Fatalf("an aborted transaction: %v, want idem.ErrConfig saying so", err)
		}
	})
}

// A bun transaction of another dialect than the tier's is refused before
// any statement.
func TestOtherDialectTx(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, _ := b.layer(t)
		other := testenv.SQLiteMemory(t)
		if s.Kind == other.Kind || strings.HasPrefix(s.Kind, "sqlite") {
			other = testenv.MySQL(t)
		}
		db := other.Open(t)
		err := db.RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := l.MarkProcessed(ctx, tx, "c", "e")
			return err
		})
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "for a tier on") {
			t.Fatalf("a %s transaction for a %s tier: %v, want idem.ErrConfig", other.Kind, s.Kind, err)
		}
	})
}

// A pool where the caller's transaction belongs is refused: idem's row
// would commit on its own.
func TestPoolForTx(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		for _, pool := range []sqllayer.Tx{db, db.DB} {
			if _, err := l.MarkProcessed(t.Context(), pool, "c", "pooled"); !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "a pool") {
				t.Fatalf("MarkProcessed on a %T: %v, want idem.ErrConfig", pool, err)
			}
			if _, err := l.MarkProcessedBatch(t.Context(), pool, "c", []string{"pooled"}); !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("MarkProcessedBatch on a %T: %v, want idem.ErrConfig", pool, err)
			}
		}
		// Nothing was written: the event is new to a transaction.
		err := db.RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			dup, err := l.MarkProcessed(ctx, tx, "c", "pooled")
			if err == nil && dup {
				err = errors.New("a refused mark was written")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
