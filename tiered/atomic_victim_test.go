package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
	"github.com/uptrace/bun"
)

// charges is a ledger that lets a key have several rows, so that a second
// charge for one key shows.
type charges struct {
	table string
	db    *bun.DB
}

func newCharges(t *testing.T, r *atomicRig) *charges {
	t.Helper()
	return &charges{table: businessTable(t, r, "charges_by_key", "key_id VARCHAR(64) NOT NULL, amount INTEGER NOT NULL"), db: r.ledger.db}
}

// charge writes one row for key through the execution's transaction.
func (c *charges) charge(ctx context.Context, key idem.Key) error {
	tx, ok := sqllayer.TxFrom(ctx)
	if !ok {
		return errors.New("no transaction on the work's context")
	}
	_, err := c.db.NewRaw("INSERT INTO "+c.table+" (key_id, amount) VALUES (?, 100)", key.String()).Conn(tx).Exec(ctx)
	return err
}

func (c *charges) count(t *testing.T, r *atomicRig, key idem.Key) int {
	t.Helper()
	var n int
	if err := r.ledger.db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+c.table+" WHERE key_id = ?", key.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// retryUntilPaid calls Do as a client retries, until an answer.
func retryUntilPaid(t *testing.T, s *tiered.Store, key idem.Key, fn tiered.Func) tiered.Result {
	t.Helper()
	for range 20 {
		res, err := s.Do(t.Context(), key, "fp", fn)
		if err == nil {
			return res
		}
		t.Logf("%s: %v; the client retries", key, err)
	}
	t.Fatalf("%s: no answer after 20 tries", key)
	return tiered.Result{}
}

// A deadlock victim's later statements never persist unless the claim
// commits with them. Two payments lock two accounts in opposite orders;
// the server rolls one back whole, and its function shrugs off the failed
// statement and writes its charge on. On MariaDB the session was then in
// autocommit, and the charge committed on its own: the execution failed
// (its claim was gone), the retry charged again. On Postgres the aborted
// transaction refuses every later statement (25P02).
func TestAtomicDeadlockVictimPersistsNothing(t *testing.T) {
	sqlOnlyRig(t, func(t *testing.T, r *atomicRig) {
		if !r.st.SQL.Real {
			t.Skip("SQLite has one writer: two executions never hold row locks at once")
		}
		acct := newAccounts(t, r, "a", "b")
		ledger := newCharges(t, r)
		a, b := r.store(t), r.store(t)
		keys := []idem.Key{newKey(t), newKey(t)}
		locked := []chan struct{}{make(chan struct{}), make(chan struct{})}
		pay := func(i int) tiered.Func {
			first, second := []string{"a", "b"}[i], []string{"b", "a"}[i]
			return func(ctx context.Context) ([]byte, error) {
				if err := acct.debit(ctx, first, 100); err != nil {
					return nil, err
				}
				close(locked[i])
				<-locked[1-i]
				if err := acct.debit(ctx, second, 1); err != nil {
					t.Logf("payment %d: %v (a best-effort fee: shrugged off)", i, err)
				}
				if err := ledger.charge(ctx, keys[i]); err != nil {
					return nil, err
				}
				return []byte(fmt.Sprintf("paid %d", i)), nil
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, s := range []*tiered.Store{a, b} {
			wg.Go(func() { _, errs[i] = s.Do(t.Context(), keys[i], "fp", pay(i)) })
		}
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			t.Fatal("neither payment was the deadlock's victim: the test proves nothing")
		}
		for i, key := range keys {
			if errs[i] == nil {
				continue
			}
			t.Logf("payment %d, the victim: %v", i, errs[i])
			if n := ledger.count(t, r, key); n != 0 {
				t.Fatalf("the victim's failed execution left %d charge rows, want 0", n)
			}
			// The client retries, as it does after any error.
			res := retryUntilPaid(t, []*tiered.Store{a, b}[i], key, func(ctx context.Context) ([]byte, error) {
				if err := acct.debit(ctx, "a", 100); err != nil {
					return nil, err
				}
				return []byte("paid on retry"), ledger.charge(ctx, key)
			})
			if string(res.Value) != "paid on retry" {
				t.Fatalf("the retry: %+v, want its own run", res)
			}
		}
		for i, key := range keys {
			if n := ledger.count(t, r, key); n != 1 {
				t.Fatalf("payment %d: %d charge rows, want 1", i, n)
			}
		}
	})
}

// A transaction the database rolls back whole, under a function that goes
// on writing: SQLite does that on SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY or
// SQLITE_NOMEM, InnoDB on a lock wait timeout with
// innodb_rollback_on_timeout; a ROLLBACK sent through the transaction
// does the same here. The charge written after it persists nowhere, and
// the retry charges once.
func TestAtomicTransactionRolledBackUnderTheFunction(t *testing.T) {
	sqlOnlyRig(t, func(t *testing.T, r *atomicRig) {
		if r.st.SQL.Kind == "postgres" {
			t.Skip("Postgres never ends a transaction on its own: an error aborts it, and it refuses every later statement (TestAtomicDeadlockVictimPersistsNothing)")
		}
		ledger := newCharges(t, r)
		s := r.store(t)
		key := newKey(t)
		_, err := s.Do(t.Context(), key, "fp", func(ctx context.Context) ([]byte, error) {
			tx, _ := sqllayer.TxFrom(ctx)
			if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
				return nil, err
			}
			if err := ledger.charge(ctx, key); err != nil {
				t.Logf("the charge after the rollback: %v", err)
			}
			return []byte("paid"), nil
		})
		if err == nil {
			t.Fatal("an execution whose transaction the database rolled back answered as committed")
		}
		if n := ledger.count(t, r, key); n != 0 {
			t.Fatalf("the rolled-back execution left %d charge rows, want 0", n)
		}
		res := retryUntilPaid(t, s, key, func(ctx context.Context) ([]byte, error) {
			return []byte("paid on retry"), ledger.charge(ctx, key)
		})
		if string(res.Value) != "paid on retry" {
			t.Fatalf("the retry: %+v, want its own run", res)
		}
		if n := ledger.count(t, r, key); n != 1 {
			t.Fatalf("%d charge rows, want 1", n)
		}
		// The connection went back to the pool in autocommit, unguarded.
		other := newKey(t)
		if _, err := r.ledger.db.ExecContext(t.Context(), "INSERT INTO "+ledger.table+" (key_id, amount) VALUES (?, 1)", other.String()); err != nil {
			t.Fatal(err)
		}
		if n := ledger.count(t, r, other); n != 1 {
			t.Fatalf("a plain insert after the executions: %d rows, want 1", n)
		}
	})
}
