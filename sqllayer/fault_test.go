package sqllayer_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// faultRig is a Postgres layer whose pool is marked with an application
// name, an admin pool that can hold row locks and end the layer's backends.
type faultRig struct {
	b     *backend
	app   string
	admin *bun.DB
}

func newFaultRig(t *testing.T) *faultRig {
	s := testenv.Postgres(t)
	b := setup(t, s)
	return &faultRig{b: b, app: testenv.Name("idemfault"), admin: s.Open(t)}
}

// layer returns a Layer over a pool of its own marked with the rig's
// application name.
func (r *faultRig) layer(t *testing.T, opts ...sqllayer.Option) *sqllayer.Layer {
	db := testenv.WithApplicationName(t, r.b.sql, r.app).Open(t)
	return must.Get(sqllayer.New(db, append(append([]sqllayer.Option(nil), r.b.opts...), opts...)...))(t)
}

// holdNewKey inserts an uncommitted claim of k with fingerprint "fp" in an
// admin transaction, so that a Reserve of k waits for it; rollback ends it.
func (r *faultRig) holdNewKey(t *testing.T, k idem.Key) (rollback func()) {
	tx := r.insertUncommitted(t, k)
	return func() { _ = tx.Rollback() }
}

func (r *faultRig) insertUncommitted(t *testing.T, k idem.Key) bun.Tx {
	tx, err := r.admin.BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx(t), "INSERT INTO "+r.b.records+` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
		VALUES (?, '', '', ?, 1, ?, now() + interval '1 hour', now(), now() + interval '1 hour')`, digest(k), []byte("fp"), []byte("holder")); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	return tx
}

// lockRow locks k's row in an admin transaction, so that a Complete of k
// waits for it; rollback ends it.
func (r *faultRig) lockRow(t *testing.T, k idem.Key) (rollback func()) {
	tx, err := r.admin.BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := k.Digest()
	var one int
	if err := tx.NewRaw("SELECT 1 FROM "+r.b.records+" WHERE key_digest = ? FOR UPDATE", d[:]).Scan(ctx(t), &one); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback() }
}

// waiterPID returns the backend of the rig's pool that waits for a lock.
func (r *faultRig) waiterPID(t *testing.T) int {
	testenv.WaitPostgresLockWait(t, r.admin, r.app, 10*time.Second)
	var pid int
	if err := r.admin.NewRaw("SELECT pid FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock' LIMIT 1", r.app).Scan(ctx(t), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitNewWaiter waits until a backend other than old waits for a lock: the
// layer retried on a new connection.
func (r *faultRig) waitNewWaiter(t *testing.T, old int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := r.admin.NewRaw("SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock' AND pid <> ?", r.app, old).Scan(ctx(t), &n); err == nil && n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the layer did not retry on a new connection")
}

// TestTerminatedDuringReserve ends the layer's backend while its Reserve
// waits on a concurrent claim's row lock.
func TestTerminatedDuringReserve(t *testing.T) {
	r := newFaultRig(t)

	t.Run("NoRetryFailsClosed", func(t *testing.T) {
		l := r.layer(t, sqllayer.WithRetries(0))
		k := idem.NewKey("fault", testenv.Name("reserve"))
		rollback := r.holdNewKey(t, k)
		done := make(chan error, 1)
		go func() {
			_, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
			done <- err
		}()
		r.waiterPID(t)
		if n := testenv.TerminatePostgres(t, r.admin, r.app); n == 0 {
			t.Fatal("no backend terminated")
		}
		err := <-done
		if !errors.Is(err, idem.ErrUnavailable) {
			t.Fatalf("Reserve on a terminated connection: %v, want idem.ErrUnavailable", err)
		}
		t.Logf("observed: %v", err)
		rollback()
		if _, err := l.Get(ctx(t), k); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Get after the failed Reserve: %v, want ErrNotFound (nothing half-written)", err)
		}
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil || !claimed || rec.Token == "" {
			t.Fatalf("the next Reserve: claimed=%v err=%v, want a claim", claimed, err)
		}
	})

	t.Run("RetriedOnNewConnection", func(t *testing.T) {
		l := r.layer(t)
		k := idem.NewKey("fault", testenv.Name("reserve"))
		rollback := r.holdNewKey(t, k)
		done := reserveAsync(t, l, k)
		old := r.waiterPID(t)
		testenv.TerminatePostgres(t, r.admin, r.app)
		r.waitNewWaiter(t, old)
		rollback()
		res := <-done
		if res.err != nil || !res.claimed {
			t.Fatalf("Reserve retried after the termination: claimed=%v err=%v, want the claim", res.claimed, res.err)
		}
		t.Logf("observed: a clean retry on a new connection claimed the key")
		if got := count(t, r.admin, r.b.records, "key_digest = ?", digest(k)); got != 1 {
			t.Fatalf("%d rows for the key, want 1", got)
		}
	})
}

// TestTerminatedDuringComplete ends the layer's backend while its Complete
// waits for a row lock held by another transaction.
func TestTerminatedDuringComplete(t *testing.T) {
	r := newFaultRig(t)

	t.Run("NoRetryFailsClosed", func(t *testing.T) {
		l := r.layer(t, sqllayer.WithRetries(0))
		k := idem.NewKey("fault", testenv.Name("complete"))
		rec, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rollback := r.lockRow(t, k)
		done := make(chan error, 1)
		go func() { done <- l.Complete(ctx(t), k, rec.Token, []byte("paid"), time.Hour) }()
		r.waiterPID(t)
		testenv.TerminatePostgres(t, r.admin, r.app)
		err = <-done
		if !errors.Is(err, idem.ErrUnavailable) {
			t.Fatalf("Complete on a terminated connection: %v, want idem.ErrUnavailable", err)
		}
		t.Logf("observed: %v", err)
		rollback()
		got, err := l.Get(ctx(t), k)
		if err != nil || got.State != idem.StateInProgress || got.Result != nil {
			t.Fatalf("after the failed Complete: %+v, %v; want the claim still in progress, no result", got, err)
		}
		if err := l.Complete(ctx(t), k, rec.Token, []byte("paid"), time.Hour); err != nil {
			t.Fatalf("the next Complete: %v", err)
		}
		if got, _ := l.Get(ctx(t), k); string(got.Result) != "paid" {
			t.Fatalf("stored result %q", got.Result)
		}
	})

	t.Run("RetriedOnNewConnection", func(t *testing.T) {
		l := r.layer(t)
		k := idem.NewKey("fault", testenv.Name("complete"))
		rec, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rollback := r.lockRow(t, k)
		done := make(chan error, 1)
		go func() { done <- l.Complete(ctx(t), k, rec.Token, []byte("paid"), time.Hour) }()
		old := r.waiterPID(t)
		testenv.TerminatePostgres(t, r.admin, r.app)
		r.waitNewWaiter(t, old)
		rollback()
		if err := <-done; err != nil {
			t.Fatalf("Complete retried after the termination: %v", err)
		}
		t.Logf("observed: a clean retry on a new connection completed the record")
		if got, _ := l.Get(ctx(t), k); got.State != idem.StateCompleted || string(got.Result) != "paid" {
			t.Fatalf("after the retried Complete: %+v", got)
		}
	})
}

// TestDeadlineWhileWaiting: a claim that waits for a lock on its key (an
// open transaction inserted it and holds it, as an atomic execution does)
// stops waiting before the caller's deadline, and says the key is held:
// idem.ErrInFlight, not a statement cut off, whose outcome no one would
// know. (A server that stops answering fails closed: TestUnreachableServers.)
func TestDeadlineWhileWaiting(t *testing.T) {
	r := newFaultRig(t)
	l := r.layer(t)
	k := idem.NewKey("fault", testenv.Name("deadline"))
	rollback := r.holdNewKey(t, k)
	defer rollback()
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	_, _, err := l.Reserve(c, k, "fp", time.Minute, time.Hour)
	if !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("Reserve of a key an open transaction holds: %v, want idem.ErrInFlight before the deadline", err)
	}
}

// TestUnreachableServers needs no server: nothing listens on port 1, and a
// listener that accepts but never answers plays a hung server.
func TestUnreachableServers(t *testing.T) {
	t.Parallel()
	hung := hungServer(t)
	for _, tc := range []struct {
		name    string
		open    func() (*bun.DB, error)
		timeout time.Duration
	}{
		{"postgres-refused", func() (*bun.DB, error) { return openPG("postgres://x@127.0.0.1:1/x?sslmode=disable") }, 10 * time.Second},
		{"mysql-refused", func() (*bun.DB, error) { return openMySQL("root@tcp(127.0.0.1:1)/x") }, 10 * time.Second},
		{"postgres-hung", func() (*bun.DB, error) { return openPG("postgres://x@" + hung + "/x?sslmode=disable") }, 300 * time.Millisecond},
		// bun.NewDB asks a MySQL server its version without a context: the
		// DSN's timeouts bound that question; the calls' contexts bound theirs.
		{"mysql-hung", func() (*bun.DB, error) { return openMySQL("root@tcp(" + hung + ")/x?timeout=1s&readTimeout=1s") }, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := tc.open()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			l := must.Get(sqllayer.New(db))(t)
			call := func() context.Context {
				c, cancel := context.WithTimeout(ctx(t), tc.timeout)
				t.Cleanup(cancel)
				return c
			}
			k := idem.NewKey("", "unreachable")
			_, _, err = l.Reserve(call(), k, "fp", time.Minute, time.Hour)
			if !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("Reserve: %v, want idem.ErrUnavailable", err)
			}
			t.Logf("observed: %v", err)
			if err := l.Complete(call(), k, "token", nil, time.Hour); !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("Complete: %v, want idem.ErrUnavailable", err)
			}
			if _, err := l.DeleteExpired(call(), 10); !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("DeleteExpired: %v, want idem.ErrUnavailable", err)
			}
		})
	}
}

func openPG(dsn string) (*bun.DB, error) {
	sqldb, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(testenv.MaxTestConns)
	return bun.NewDB(sqldb, pgdialect.New()), nil
}

func openMySQL(dsn string) (*bun.DB, error) {
	sqldb, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(testenv.MaxTestConns)
	return bun.NewDB(sqldb, mysqldialect.New()), nil
}

// hungServer accepts TCP connections and never answers; it closes them all
// when the test ends.
func hungServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func digest(k idem.Key) []byte {
	d := k.Digest()
	return d[:]
}

// reserved is the answer of one Reserve.
type reserved struct {
	rec     idem.Record
	claimed bool
	err     error
}

// reserveAsync sends a Reserve of k (fingerprint "fp") from another
// goroutine, for a test that must act while it waits on the database.
func reserveAsync(t *testing.T, l *sqllayer.Layer, k idem.Key) <-chan reserved {
	done := make(chan reserved, 1)
	go func() {
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		done <- reserved{rec, claimed, err}
	}()
	return done
}
