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
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// accounts is a business table of balances that payments debit.
type accounts struct {
	table string
	db    *bun.DB
}

// businessTable creates a table of the work's own, dropped when the test
// ends, and returns its name.
func businessTable(t *testing.T, r *atomicRig, base, columns string) string {
	t.Helper()
	table := testenv.Name(base)
	db := r.ledger.db
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" ("+columns+")"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
	})
	return table
}

func newAccounts(t *testing.T, r *atomicRig, ids ...string) *accounts {
	t.Helper()
	a := &accounts{table: businessTable(t, r, "accounts", "id VARCHAR(64) PRIMARY KEY, balance INTEGER NOT NULL"), db: r.ledger.db}
	for _, id := range ids {
		if _, err := r.ledger.db.ExecContext(t.Context(), "INSERT INTO "+a.table+" (id, balance) VALUES (?, 1000)", id); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// debit takes amount off the account id in the execution's transaction.
func (a *accounts) debit(ctx context.Context, id string, amount int) error {
	tx, ok := sqllayer.TxFrom(ctx)
	if !ok {
		return errors.New("no transaction on the work's context")
	}
	_, err := a.db.NewRaw("UPDATE "+a.table+" SET balance = balance - ? WHERE id = ?", amount, id).Conn(tx).Exec(ctx)
	return err
}

func (a *accounts) balance(t *testing.T, r *atomicRig, id string) int {
	t.Helper()
	var n int
	if err := r.ledger.db.QueryRowContext(t.Context(), "SELECT balance FROM "+a.table+" WHERE id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sqlOnlyRig runs fn on every database, without Redis: the cases below
// are the database's.
func sqlOnlyRig(t *testing.T, fn func(t *testing.T, r *atomicRig)) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		st := stacktest.On(t, s.Kind, testenv.MiniRedis(t), s)
		fn(t, &atomicRig{st: st, ledger: newLedger(t, st)})
	})
}

// The claim's bound on waiting for a lock is the claim's alone. Two
// payments with different keys debit one account: the second waits for
// the first's row lock as it would in a plain transaction, however short
// the Store's wait — and on SQLite, whose one writer the first holds, a
// key no one holds waits for the database rather than answering
// ErrInFlight.
func TestAtomicHandlersWaitForTheirOwnLocks(t *testing.T) {
	sqlOnlyRig(t, func(t *testing.T, r *atomicRig) {
		for _, wait := range []time.Duration{0, 250 * time.Millisecond} {
			t.Run(fmt.Sprintf("wait %v", wait), func(t *testing.T) {
				acct := newAccounts(t, r, "shared")
				a, b := r.store(t, tiered.WithWait(wait)), r.store(t, tiered.WithWait(wait))
				first, second := newKey(t), newKey(t)
				debited := make(chan struct{})
				// The first holds the account's row past the wait (and past
				// MariaDB's least lock wait, a second).
				owner := doOn(t.Context(), a, first, func(ctx context.Context) ([]byte, error) {
					if err := acct.debit(ctx, "shared", 100); err != nil {
						return nil, err
					}
					if err := r.charge(ctx, first.String()); err != nil {
						return nil, err
					}
					close(debited)
					time.Sleep(1500 * time.Millisecond)
					return []byte("first"), nil
				})
				<-debited
				res, err := b.Do(t.Context(), second, "fp", func(ctx context.Context) ([]byte, error) {
					if err := acct.debit(ctx, "shared", 100); err != nil {
						return nil, err
					}
					return []byte("second"), r.charge(ctx, second.String())
				})
				if err != nil || string(res.Value) != "second" {
					t.Fatalf("the second payment, another key on the same account: %+v, %v; want it run", res, err)
				}
				if got := within(t, owner, "the first payment"); got.err != nil || string(got.res.Value) != "first" {
					t.Fatalf("the first payment: %v", got)
				}
				if n := acct.balance(t, r, "shared"); n != 800 {
					t.Fatalf("balance %d, want 800 (two debits)", n)
				}
				for _, k := range []string{first.String(), second.String()} {
					if n := r.rows(t, k); n != 1 {
						t.Fatalf("charge rows of %s: %d, want 1", k, n)
					}
				}
			})
		}
	})
}

// sessionBound is how each database names the bound on a statement's
// wait for a lock: how to set it on a session, and read it.
var sessionBound = map[string]struct{ set, read, want string }{
	"postgres":      {"SET lock_timeout = '7s'", "SHOW lock_timeout", "7s"},
	"mysql":         {"SET SESSION innodb_lock_wait_timeout = 7", "SELECT @@SESSION.innodb_lock_wait_timeout", "7"},
	"sqlite-file":   {"PRAGMA busy_timeout = 7000", "PRAGMA busy_timeout", "7000"},
	"sqlite-memory": {"PRAGMA busy_timeout = 7000", "PRAGMA busy_timeout", "7000"},
}

// The function of an atomic execution sees the lock bound its session had
// — the user's own, set on the connection — not the claim's; and the
// connection goes back to the pool with it (on MySQL and MariaDB with
// autocommit on again).
func TestAtomicHandlerSeesTheSessionsLockBound(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, sq *testenv.SQL) {
		st := stacktest.On(t, sq.Kind, testenv.MiniRedis(t), sq)
		n := 2 // the fewest the atomic mode runs on: each is read after
		if sq.Kind == "sqlite-memory" {
			n = 1 // the one connection that holds the database
		}
		l, db := poolOf(t, st, n)
		bound := sessionBound[sq.Kind]
		conns := func(fn func(conn bun.Conn)) {
			t.Helper()
			var held []bun.Conn
			for range n {
				held = append(held, must.Get(db.Conn(t.Context()))(t))
			}
			for _, c := range held {
				fn(c)
				_ = c.Close()
			}
		}
		conns(func(c bun.Conn) {
			if _, err := c.ExecContext(t.Context(), bound.set); err != nil {
				t.Fatal(err)
			}
		})
		s := newStore(t, tiered.WithSQL(l), tiered.WithAtomic(true), tiered.WithWait(3*time.Second))
		for _, fail := range []bool{false, true} {
			var during string
			_, err := s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
				tx, _ := sqllayer.TxFrom(ctx)
				if err := tx.QueryRowContext(ctx, bound.read).Scan(&during); err != nil {
					return nil, err
				}
				if fail {
					return nil, errDeclined
				}
				return []byte("ok"), nil
			})
			if fail != errors.Is(err, errDeclined) || (!fail && err != nil) {
				t.Fatalf("fail=%v: Do: %v", fail, err)
			}
			if during != bound.want {
				t.Fatalf("fail=%v: the function's lock bound %q, want the session's %q", fail, during, bound.want)
			}
			conns(func(c bun.Conn) {
				var after string
				if err := c.QueryRowContext(t.Context(), bound.read).Scan(&after); err != nil {
					t.Fatal(err)
				}
				if after != bound.want {
					t.Fatalf("fail=%v: a later statement's lock bound %q, want the session's %q", fail, after, bound.want)
				}
				if sq.Kind == "mysql" {
					var ac int
					if err := c.QueryRowContext(t.Context(), "SELECT @@SESSION.autocommit").Scan(&ac); err != nil || ac != 1 {
						t.Fatalf("fail=%v: autocommit %d, %v; want it on again", fail, ac, err)
					}
				}
			})
		}
	})
}

// SQLite's one writer held by a transaction this process knows nothing of
// (another process's): a brand-new key waits for it the wait and the SQL
// timeout together, then answers ErrUnavailable — never ErrInFlight, for
// no one holds the key — and runs once the writer is free; a key already
// completed replays at once, without waiting for the writer.
func TestAtomicSQLiteWriterHeldElsewhere(t *testing.T) {
	for _, sq := range []*testenv.SQL{testenv.SQLiteFile(t)} {
		st := stacktest.On(t, sq.Kind, testenv.MiniRedis(t), sq)
		r := &atomicRig{st: st, ledger: newLedger(t, st)}
		s := r.store(t, tiered.WithWait(200*time.Millisecond), tiered.WithTimeouts(time.Second, time.Second))
		done := newKey(t)
		if _, err := s.Do(t.Context(), done, "fp", func(ctx context.Context) ([]byte, error) {
			return []byte("paid"), r.charge(ctx, done.String())
		}); err != nil {
			t.Fatal(err)
		}
		other := st.DB(t)
		conn := must.Get(other.Conn(t.Context()))(t)
		if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		held := true
		t.Cleanup(func() {
			if held {
				_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			}
			_ = conn.Close()
		})
		// Another Store, without the first's local cache: SQL answers.
		fresh2 := r.store(t, tiered.WithWait(200*time.Millisecond), tiered.WithTimeouts(time.Second, time.Second), tiered.WithLocalCache(0, 0, 0))
		res, err := fresh2.Do(t.Context(), done, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if err != nil || string(res.Value) != "paid" || !res.Replayed {
			t.Fatalf("a completed key with the writer held elsewhere: %+v, %v; want its replay", res, err)
		}
		fresh := newKey(t)
		pay := func(ctx context.Context) ([]byte, error) { return []byte("fresh"), r.charge(ctx, fresh.String()) }
		if _, err := s.Do(t.Context(), fresh, "fp", pay); !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("a new key with the writer held elsewhere: %v, want ErrUnavailable (not in flight)", err)
		}
		if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		held = false
		if res, err := s.Do(t.Context(), fresh, "fp", pay); err != nil || string(res.Value) != "fresh" {
			t.Fatalf("the new key once the writer is free: %+v, %v", res, err)
		}
	}
}
