package sqllayer

import (
	"context"
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

// connect takes a connection of the pool for an atomic execution, waiting
// at most wait (minAcquire at least): a pool whose connections all hold
// open transactions — executions in flight — gives idem.ErrInFlight then.
// On SQLite the connection's busy timeout becomes wait (at least a
// millisecond), so that the claim waits for the one writer no longer than
// the Store's wait; disconnect puts the DSN's back.
func (l *Layer) connect(ctx context.Context, wait time.Duration) (bun.Conn, error) {
	acquireCtx, cancel := context.WithTimeout(ctx, max(wait, minAcquire))
	defer cancel()
	conn, err := l.db.Conn(acquireCtx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
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

// disconnect returns an atomic execution's connection to the pool.
func (l *Layer) disconnect(conn bun.Conn) {
	if l.sqlite {
		// Best effort: a connection that broke is not reused.
		_, _ = conn.ExecContext(context.Background(), sqliteBusy+" = "+strconv.FormatInt(l.busy.Load(), 10))
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
