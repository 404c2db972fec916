package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The first calls of TestStoreDoEndings that take more than one step.

// value is a body that returns v.
func value(v string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(v), nil }
}

// fails is a body that returns v and err.
func fails(v string, err error) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		if v == "" {
			return nil, err
		}
		return []byte(v), err
	}
}

// gaveUp makes the first call with a context its caller cancels while the
// work runs, and lets the work end with then once the caller has its
// answer.
func (e *endingEnv) gaveUp(t *testing.T, then func(context.Context) ([]byte, error)) answered {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ch := doOn(ctx, e.a, e.key, e.held(then))
	within(t, e.started, "the work to start")
	cancel(errGone)
	got := within(t, ch, "the first caller's Do")
	close(e.release)
	return got
}

// duplicated makes the first call, and while its work runs a duplicate on
// the same Store, which waits for it and shares its answer, and one on a
// Store that does not wait, which gets ErrInFlight.
func (e *endingEnv) duplicated(t *testing.T) answered {
	ch := doOn(t.Context(), e.a, e.key, e.held(value("paid")))
	within(t, e.started, "the work to start")
	impatient, _ := e.store(t, tiered.WithWait(0))
	if _, err := impatient.Do(t.Context(), e.key, "fp", e.fn(value("impatient"))); !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("a duplicate that does not wait got %v; want ErrInFlight", err)
	}
	joining := newJoinSignal(t.Context())
	dup := doOn(joining, e.a, e.key, e.fn(value("the duplicate ran")))
	within(t, joining.joined, "the duplicate to wait")
	close(e.release)
	got := within(t, ch, "the first caller's Do")
	d := within(t, dup, "the duplicate's Do")
	if d.err != nil || string(d.res.Value) != "paid" || !d.res.Replayed || !d.res.Waited {
		t.Errorf("a duplicate that waits got %v; want the shared result", d)
	}
	return got
}

// commitFails makes the first call with work whose transaction completes
// the reservation and then fails at COMMIT: a deferred foreign key that
// nothing satisfies is checked only then.
func (e *endingEnv) commitFails(t *testing.T) answered {
	db := e.ledger.db
	if e.r.st.SQL.Kind == "sqlite-file" {
		// SQLite checks foreign keys only on connections that ask for it.
		db = (&testenv.SQL{Kind: e.r.st.SQL.Kind, DSN: e.r.st.SQL.DSN + "&_pragma=foreign_keys(1)"}).Open(t)
	}
	refs := testenv.Name("refs")
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+refs+" (id VARCHAR(64) PRIMARY KEY, charge VARCHAR(64) REFERENCES "+
		e.ledger.table+" (id) DEFERRABLE INITIALLY DEFERRED)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+refs); err != nil {
			t.Errorf("drop %s: %v", refs, err)
		}
	})
	if e.atomic && e.r.st.SQL.Kind == "sqlite-file" {
		// The transaction is the Store's: its connections must check them.
		l := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(e.r.st.Records), sqllayer.WithEventsTable(e.r.st.Events),
			sqllayer.WithVersionsTable(e.r.st.Versions)))(t)
		e.a, e.aLayer = e.atomicStore(t, l)
		e.sql = l
	}
	var commitErr error
	got := e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
		commitErr = e.inTx(ctx, db, func(ctx context.Context, tx bun.IConn, complete func() error) error {
			if _, err := db.NewRaw("INSERT INTO "+refs+" (id, charge) VALUES (?, ?)", e.id, "no such charge").Conn(tx).Exec(ctx); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			if e.atomic {
				return nil // the Store completes, and its COMMIT fails
			}
			return complete()
		})
		return []byte(charged + e.id), commitErr
	}))
	if !e.atomic && commitErr == nil {
		t.Fatal("the transaction committed")
	}
	return got
}
