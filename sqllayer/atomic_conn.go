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
// connections that an atomic execution's claim sets for its wait, and
// restores when the connection returns to the pool.
const sqliteBusy = "PRAGMA busy_timeout"

// connect takes a connection of the pool for an atomic execution. When
// the pool has a limit and every connection is taken — executions in flight
// hold them for their whole length — it waits at most wait (minAcquire at
// least) for one to come free, and gives idem.ErrInFlight then. Otherwise
// the pool opens a connection, and that is bounded by timeout (0: by ctx
// alone) like any statement: a slow dial is a slow database, not a key in
// flight. On SQLite the connection's busy timeout becomes wait (at least a
// millisecond), so that the claim waits for the one writer no longer than
// the Store's wait; disconnect puts the DSN's back.
func (l *Layer) connect(ctx context.Context, wait, timeout time.Duration) (bun.Conn, error) {
	acquireCtx, cancel := ctx, context.CancelFunc(func() {})
	full := l.poolFull()
	switch {
	case full:
		acquireCtx, cancel = context.WithTimeout(ctx, max(wait, minAcquire))
	case timeout > 0:
		acquireCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	conn, err := l.db.Conn(acquireCtx)
	if err != nil {
		if full && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return bun.Conn{}, fmt.Errorf("%w: sqllayer: no connection of the pool came free within the wait: %w", idem.ErrInFlight, err)
		}
		return bun.Conn{}, err
	}
	if l.sqlite {
		var old int64
		err := conn.QueryRowContext(ctx, sqliteBusy).Scan(&old)
		if err == nil {
			_, err = conn.ExecContext(ctx, sqliteBusy+" = "+strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
		}
		if err != nil {
			_ = conn.Close()
			return bun.Conn{}, err
		}
		l.busy.Store(old)
	}
	return conn, nil
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
// the settings the claim changed put back: SQLite's busy timeout, the
// session's innodb_lock_wait_timeout on MySQL and MariaDB (the server's
// global value again, so that a later statement on the connection waits
// as every other does). A connection whose setting cannot be put back is
// not reused.
func (l *Layer) disconnect(conn bun.Conn) {
	var reset string
	switch {
	case l.sqlite:
		reset = sqliteBusy + " = " + strconv.FormatInt(l.busy.Load(), 10)
	case l.dialect == dialect.MySQL:
		reset = "SET SESSION innodb_lock_wait_timeout = DEFAULT"
	}
	if reset != "" {
		ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
		_, err := conn.ExecContext(ctx, reset)
		cancel()
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = conn.Close()
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
