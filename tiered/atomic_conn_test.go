package tiered_test

import (
	"context"
	"errors"
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

// poolOf returns a SQL layer of st's tables over a pool of at most n
// connections, and the pool.
func poolOf(t *testing.T, st *stacktest.Stack, n int) (*sqllayer.Layer, *bun.DB) {
	t.Helper()
	db := st.DB(t)
	db.SetMaxOpenConns(n)
	l := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events),
		sqllayer.WithVersionsTable(st.Versions)))(t)
	return l, db
}

// On MySQL and MariaDB the claim's lock wait is a session setting of the
// connection: once the execution ends, the connection goes back to the
// pool with the server's value, and a later plain statement on it waits as
// every other does.
func TestAtomicMySQLLockWaitRestored(t *testing.T) {
	st := stacktest.On(t, "mysql", testenv.MiniRedis(t), testenv.MySQL(t))
	l, db := poolOf(t, st, 2) // the fewest the atomic mode runs on: each is read after
	s := newStore(t, tiered.WithSQL(l), tiered.WithAtomic(true), tiered.WithWait(3*time.Second))
	var global int64
	if err := db.QueryRowContext(t.Context(), "SELECT @@GLOBAL.innodb_lock_wait_timeout").Scan(&global); err != nil {
		t.Fatal(err)
	}
	if global == 3 {
		t.Fatal("the server's lock wait is the Store's: the test cannot tell them apart")
	}
	for _, fail := range []bool{false, true} {
		var during int64
		_, err := s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
			tx, _ := sqllayer.TxFrom(ctx)
			if err := tx.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&during); err != nil {
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
		if during != 3 {
			t.Fatalf("fail=%v: the claim's session lock wait %d, want 3 (the Store's wait)", fail, during)
		}
		// Both connections at once: one of them is the execution's.
		for i, conn := range []bun.Conn{must.Get(db.Conn(t.Context()))(t), must.Get(db.Conn(t.Context()))(t)} {
			var after int64
			err := conn.QueryRowContext(t.Context(), "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&after)
			_ = conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			if after != global {
				t.Fatalf("fail=%v: a later statement on connection %d has lock wait %d, want the server's %d", fail, i, after, global)
			}
		}
	}
}

// A pool whose connections all hold open transactions answers a new key
// with idem.ErrInFlight once the wait is over; a connection that comes
// free serves it.
func TestAtomicPoolFull(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, sq *testenv.SQL) {
		if !sq.Real {
			t.Skip("an embedded database's pool is not shared with a server's limit") // SQLite serializes writers anyway
		}
		st := stacktest.On(t, sq.Kind, testenv.MiniRedis(t), sq)
		l, _ := poolOf(t, st, 2)
		s := newStore(t, tiered.WithSQL(l), tiered.WithAtomic(true), tiered.WithWait(1500*time.Millisecond))
		release := make(chan struct{})
		var owners []<-chan answered
		for range 2 {
			started := make(chan struct{})
			owners = append(owners, doOn(t.Context(), s, newKey(t), func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("held"), nil
			}))
			<-started
		}
		key := newKey(t)
		_, err := s.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("a new key with every connection held: %v, want ErrInFlight", err)
		}
		close(release)
		for _, o := range owners {
			if got := within(t, o, "an owner"); got.err != nil {
				t.Fatalf("owner: %v", got)
			}
		}
		res, err := s.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("third"), nil })
		if err != nil || string(res.Value) != "third" {
			t.Fatalf("the key once a connection came free: %+v, %v", res, err)
		}
	})
}
