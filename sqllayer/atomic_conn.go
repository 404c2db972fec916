package sqllayer

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// minAcquire is the least time a claim waits for a connection of the pool.
const minAcquire = 100 * time.Millisecond

// sqliteBusy is the busy timeout, in milliseconds, of the SQLite
// connections, which an atomic execution's claim sets for its wait, and
// puts back once it claimed or when the connection returns to the pool.
const sqliteBusy = "PRAGMA busy_timeout"

// session is the connection of one atomic execution and what its claim
// changed on it, for disconnect to put back.
type session struct {
	conn  bun.Conn
	mysql bool // autocommit (and on MySQL the lock wait) saved and changed: see mysqlSession
	maria bool // the server is MariaDB
	// galera: the server is a Galera node, and the session streams the
	// execution's rows to the cluster one at a time (see mysqlSession)
	galera bool
	// ended: the transaction's COMMIT or ROLLBACK succeeded, so the
	// session is in none (a MySQL session with autocommit off must be,
	// before autocommit is put back on: that would commit it).
	ended bool
	guard *commitGuard // SQLite: the commit hook; nil when none
	// release ends the execution's hold of its key (SQLite: see
	// sqliteHolds); nil when it holds none.
	release func()
}

// connect takes a connection of the pool for an atomic execution. When
// the pool has a limit and every connection is taken — executions in flight
// hold them for their whole length — a claim whose key an execution of this
// process holds (held: on this layer, or on SQLite on its file) waits at
// most wait (minAcquire at least) for one to come free, and gives
// idem.ErrInFlight then; any other waits until the claim's bound (wait
// and timeout together; a zero bound: ctx alone on SQLite, else the
// wait), and gives idem.ErrUnavailable then: a key no one holds is not in
// flight, and a pool too small for the executions in flight is a database
// that cannot decide now. Otherwise the pool opens a connection, and that is bounded by
// timeout (0: by ctx alone) like any statement: a slow dial is a slow
// database, not a key in flight. On SQLite the connection's busy timeout
// becomes what the claim has left of its bound (at least a millisecond;
// the DSN's, and at least the wait, when the bound is zero), so that the
// claim waits for the one writer no longer; the claim puts the DSN's back
// once it claimed, disconnect in any case.
func (l *Layer) connect(ctx context.Context, wait, timeout time.Duration, bound time.Time, held bool) (bun.Conn, error) {
	acquireCtx, cancel := ctx, context.CancelFunc(func() {})
	full := l.poolFull()
	if held {
		bound = time.Now().Add(wait) // SQLite: this process holds the key (see sqliteHolds)
	}
	waits := !held // for the claim's bound: no one here holds the key
	switch {
	case full && waits && !bound.IsZero():
		acquireCtx, cancel = context.WithDeadline(ctx, bound)
	case full && waits && l.sqlite:
	case full:
		acquireCtx, cancel = context.WithTimeout(ctx, max(wait, minAcquire))
	case timeout > 0:
		acquireCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	conn, err := l.db.Conn(acquireCtx)
	if err != nil {
		if full && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			if waits {
				return bun.Conn{}, fmt.Errorf("%w: sqllayer: no connection of the pool came free within the wait and the SQL timeout: %w", idem.ErrUnavailable, err)
			}
			return bun.Conn{}, fmt.Errorf("%w: sqllayer: no connection of the pool came free within the wait: %w", idem.ErrInFlight, err)
		}
		return bun.Conn{}, err
	}
	if l.sqlite {
		var old int64
		err := conn.QueryRowContext(ctx, sqliteBusy).Scan(&old)
		if err == nil {
			busy := max(old, wait.Milliseconds())
			if !bound.IsZero() {
				busy = time.Until(bound).Milliseconds()
			}
			_, err = conn.ExecContext(ctx, sqliteBusy+" = "+strconv.FormatInt(max(busy, 1), 10))
		}
		if err != nil {
			_ = conn.Close()
			return bun.Conn{}, err
		}
		l.busy.Store(old)
	}
	return conn, nil
}

// heldHere reports whether an atomic execution of this layer holds key in
// its open transaction: it looks only when the pool is full, through the
// executions running now.
func (l *Layer) heldHere(key idem.Key) bool {
	held := false
	l.atomics.Range(func(_, v any) bool {
		held = v.(*atomicTx).key.Equal(key)
		return !held
	})
	return held
}

// poolFull reports a pool with a limit whose connections are all in use.
func (l *Layer) poolFull() bool {
	st := l.db.Stats()
	return st.MaxOpenConnections > 0 && st.InUse >= st.MaxOpenConnections
}

// resetTimeout bounds the statement that puts a connection's setting back
// before it returns to the pool.
const resetTimeout = 5 * time.Second

// disconnect returns an atomic execution's connection to the pool, with
// what the claim changed put back: SQLite's busy timeout and commit hook;
// on MySQL and MariaDB the session's autocommit (and MySQL's lock wait) as
// they were before the claim. A connection whose settings cannot be put
// back is not reused, nor a MySQL one whose transaction may still be open.
func (l *Layer) disconnect(s *session) {
	if s.release != nil {
		s.release()
	}
	var reset string
	switch {
	case l.sqlite:
		s.guard.remove()
		reset = sqliteBusy + " = " + strconv.FormatInt(l.busy.Load(), 10)
	case s.mysql && !s.ended:
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	case s.mysql:
		reset = mysqlRestoreSession(s.maria, s.galera)
	}
	if reset != "" {
		ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
		_, err := s.conn.ExecContext(ctx, reset)
		cancel()
		if err != nil {
			_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = s.conn.Close()
}

// lockWait reports an error that says a lock wait ran out: Postgres's
// lock_timeout (55P03), MySQL's innodb_lock_wait_timeout (1205), SQLite's
// busy timeout (SQLITE_BUSY).
func lockWait(err error, d dialect.Name) bool {
	var st sqlState
	if errors.As(err, &st) && st.SQLState() == "55P03" {
		return true
	}
	switch d {
	case dialect.MySQL:
		n, ok := mysqlNumber(err)
		return ok && n == 1205
	case dialect.SQLite:
		var lite sqliteCode
		return errors.As(err, &lite) && lite.Code()&0xff == 5
	}
	return false
}
