package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// The claim of an atomic execution: a transaction begun on a connection
// of its own, and the claim row inserted in it, waiting on the unique
// index for a concurrent claim's transaction.

// claimAtomic begins transactions until one claims the key (a is its
// transaction), the key is found held (a is nil, rec what holds it), or an
// error: a conflict or a broken connection before the work begins starts
// over in a new transaction, up to the layer's retries. The whole claim —
// connections, BEGINs, statements and retries — takes at most the wait
// and the timeout together (with a timeout; else it is bounded by ctx).
func (l *Layer) claimAtomic(ctx context.Context, c *claim, until time.Time, timeout time.Duration) (*atomicTx, idem.Record, error) {
	var bound time.Time
	if timeout > 0 {
		bound = until.Add(timeout)
	}
	if l.dialect != dialect.SQLite && l.db.Stats().MaxOpenConnections == 1 {
		return nil, idem.Record{}, errOneConnection
	}
	retries := 0
	for round := 0; ; round++ {
		if round >= maxRounds {
			return nil, idem.Record{}, l.wrap("reserve", errRounds)
		}
		if !bound.IsZero() && !time.Now().Before(bound) {
			return nil, idem.Record{}, l.wrap("reserve", fmt.Errorf("sqllayer: the claim took longer than the wait and the timeout together: %w", context.DeadlineExceeded))
		}
		a, rec, next, err := l.claimOnce(ctx, c, until, bound, timeout)
		switch {
		case err == nil && next == claimGrace:
			// A lapsed lease of a claim committed outside an atomic
			// execution got its grace, as Reserve grants it: the key is
			// held, in progress.
			return nil, rec, nil
		case err == nil && next == claimAgain:
			continue
		case err == nil:
			return a, rec, nil
		case errors.Is(err, idem.ErrInFlight):
			return nil, idem.Record{}, err
		case lockWait(err, l.dialect) && l.sqlite:
			// SQLite has one writer: the lock held is the database's, by
			// an execution of this key or of any other; a key no one holds
			// is not in flight.
			return nil, idem.Record{}, fmt.Errorf("%w: sqllayer: SQLite's one writer stayed busy past the wait and the SQL timeout: %w", idem.ErrUnavailable, err)
		case lockWait(err, l.dialect):
			return nil, idem.Record{}, fmt.Errorf("%w: sqllayer: the key's claim is held by a transaction still open after the wait: %w", idem.ErrInFlight, err)
		}
		if retries >= l.retries || ctx.Err() != nil || (!l.conflict(err) && classify(err, l.dialect) != kindBroken) {
			return nil, idem.Record{}, l.wrap("reserve", err)
		}
		retries++
		if perr := pause(ctx, retries); perr != nil {
			return nil, idem.Record{}, l.wrap("reserve", err)
		}
	}
}

// errOneConnection refuses an atomic execution on a pool of one
// connection, where its transaction would leave the watch none to ask the
// server on.
var errOneConnection = fmt.Errorf("%w: sqllayer: the atomic mode needs a pool of at least two connections (sql.DB.SetMaxOpenConns): one holds the execution's transaction, another checks that the server still holds it", idem.ErrConfig)

// What one claim attempt leaves to do.
const (
	claimDone  = iota // claimed, or found the key held
	claimAgain        // the row changed between statements: start over
	claimGrace        // granted a lapsed lease its grace: the key is held
)

// claimOnce begins a transaction and claims the key in it: an insert
// first, which waits for a concurrent claim's transaction; then, when the
// key is taken, a read in a new statement (which sees what that
// transaction committed) and a takeover of an expired record or a lapsed
// lease past its grace. A transaction that claims nothing is rolled back.
// On SQLite the key is read first, outside any transaction: a record that
// holds it (a completed one, to replay) is answered without waiting for
// the database's one writer.
func (l *Layer) claimOnce(ctx context.Context, c *claim, until, bound time.Time, timeout time.Duration) (a *atomicTx, rec idem.Record, next int, err error) {
	wait := max(time.Until(until), 0)
	stmtCtx, step := ctx, timeout
	if !bound.IsZero() {
		var cancel context.CancelFunc
		stmtCtx, cancel = context.WithDeadline(ctx, bound)
		defer cancel()
		// Each step gets the timeout, and no more than the claim has left.
		step = max(min(timeout, time.Until(bound)), time.Millisecond)
	}
	// The connection is taken under the claim's bound (a pool whose
	// connections all wait for open transactions waits no longer); the
	// transaction lives in ctx.
	held := l.sqlite && l.sqliteHeld(c.digest) || !l.sqlite && l.poolFull() && l.heldHere(c.key)
	conn, err := l.connect(ctx, wait, step, bound, held)
	if err != nil {
		return nil, idem.Record{}, 0, err
	}
	s := &session{conn: conn}
	if l.sqlite {
		if err := l.sqliteWait(stmtCtx, s, c, wait, &held); err != nil {
			l.disconnect(s)
			return nil, idem.Record{}, 0, err
		}
		r := l.newRow()
		q, err := l.on(conn)
		var found bool
		if err == nil {
			found, err = l.readRow(stmtCtx, q, c.digest, &r)
		}
		switch {
		case err != nil:
			l.disconnect(s)
			return nil, idem.Record{}, 0, err
		case found && !r.takeable(c.fp):
			l.disconnect(s)
			return nil, r.record(c.key, l.resolution), claimDone, nil
		}
	}
	server, err := l.serverID(stmtCtx, conn, step)
	if err == nil && l.dialect == dialect.MySQL {
		err = l.mysqlSession(stmtCtx, s, wait)
	}
	if err != nil {
		l.disconnect(s)
		return nil, idem.Record{}, 0, err
	}
	txCtx, end := context.WithCancelCause(ctx)
	tx, err := beginBounded(txCtx, end, conn, step)
	if err != nil {
		end(nil)
		l.disconnect(s)
		return nil, idem.Record{}, 0, err
	}
	s.ended = false
	claimed, released := false, false
	defer func() {
		if !claimed && !released {
			s.ended = rollback(tx, end, step) == nil
			l.disconnect(s)
		}
	}()
	q, err := l.on(tx)
	if err != nil {
		return nil, idem.Record{}, 0, err
	}
	a = &atomicTx{l: l, ctx: txCtx, end: end, session: s, server: server, tx: tx, q: q, key: c.key, claim: c, timeout: timeout}
	token := idem.NewToken()
	var (
		ok    bool
		oldPG *string // Postgres: the lock_timeout to put back after a takeover
	)
	switch l.dialect {
	case dialect.PG:
		// At least a millisecond: 0 would turn the timeout off.
		ms := strconv.FormatInt(max(wait.Milliseconds(), 1), 10) + "ms"
		lease, expires := l.newRow().leaseUntil, l.newRow().expiresAt
		var old string
		_, err = queryOne(stmtCtx, q, l.st.atomicInsert, append(c.args(token, nil), ms), &lease, &expires, &old)
		switch {
		case err == nil && !lease.t.IsZero():
			rec, ok = c.owner(token, lease.t, expires.t, l.resolution), true
		case err == nil:
			oldPG = &old
		}
	case dialect.MySQL:
		rec, ok, err = l.insertMySQLIn(stmtCtx, q, l.atomicStmt(s, l.st.insert, wait), c, token)
	default:
		rec, ok, err = l.insertReturning(stmtCtx, q, c, token)
	}
	if err != nil {
		if held && lockWait(err, l.dialect) {
			err = fmt.Errorf("%w: sqllayer: the key's claim is held by an atomic execution of this process still open after the wait: %w", idem.ErrInFlight, err)
		}
		return nil, idem.Record{}, 0, err
	}
	if !ok {
		r := l.newRow()
		found, err := l.readRow(stmtCtx, q, c.digest, &r)
		switch {
		case err != nil:
			return nil, idem.Record{}, 0, err
		case !found:
			return nil, idem.Record{}, claimAgain, nil // released between the statements
		case !r.takeable(c.fp):
			return nil, r.record(c.key, l.resolution), claimDone, nil
		case r.state == stateInProgress && !r.expired():
			// Grant the grace outside this transaction, which holds
			// nothing: the grace must commit to count.
			s.ended = rollback(tx, end, step) == nil
			l.disconnect(s)
			released = true
			rec, ok, err = l.grace(stmtCtx, l.pool(), c, &r)
			if err != nil || !ok {
				return nil, idem.Record{}, claimAgain, err
			}
			l.observe(ctx, idem.Event{Kind: idem.EventGrace, Key: c.key})
			return nil, rec, claimGrace, nil
		}
		if rec, ok, err = l.takeoverWith(stmtCtx, q, l.atomicStmt(s, l.st.takeover, wait), c, token, r.token); err != nil || !ok {
			return nil, idem.Record{}, claimAgain, err
		}
		rec.TookOver = inProgress(r.state)
		l.observe(ctx, idem.Event{Kind: idem.EventTakeover, Key: c.key})
	}
	if err := a.restoreLockBound(stmtCtx, oldPG); err != nil {
		return nil, idem.Record{}, 0, err
	}
	if l.sqlite {
		if s.guard, _, err = guardCommits(conn); err != nil {
			return nil, idem.Record{}, 0, err
		}
	}
	if l.sqlite {
		s.release = l.sqliteHoldKey(c.digest)
	}
	claimed = true
	a.token = token
	return a, rec, claimDone, nil
}

// atomicStmt returns query as an atomic claim sends it: on MariaDB bounded
// by the wait for a lock in the statement itself.
func (l *Layer) atomicStmt(s *session, query string, wait time.Duration) string {
	if l.dialect == dialect.MySQL && s.maria {
		return mysqlBounded(query, lockSeconds(wait))
	}
	return query
}

// mysqlSession turns autocommit off on the claim's connection for the
// execution's length, and on MySQL bounds its lock wait (see
// mysqlSaveSession); disconnect puts both back.
func (l *Layer) mysqlSession(ctx context.Context, s *session, wait time.Duration) error {
	maria, err := l.isMariaDB(ctx, s.conn)
	if err != nil {
		return err
	}
	galera := false
	if maria {
		if galera, err = l.isGalera(ctx, s.conn); err != nil {
			return err
		}
	}
	s.maria, s.mysql, s.galera = maria, true, galera
	_, err = s.conn.ExecContext(ctx, mysqlSaveSession(maria, lockSeconds(wait), galera))
	s.ended = err == nil // no transaction yet: disconnect may put autocommit back
	return err
}

// sqliteWait learns the database's file (once per layer), and when an
// atomic execution of this process holds the key (*held, checked again
// now that the file is known) bounds the claim's wait for the writer by
// the Store's wait alone: the answer past it is idem.ErrInFlight.
func (l *Layer) sqliteWait(ctx context.Context, s *session, c *claim, wait time.Duration, held *bool) error {
	if err := l.sqliteFile(ctx, s.conn); err != nil {
		return err
	}
	if *held || !l.sqliteHeld(c.digest) {
		return nil
	}
	*held = true
	_, err := s.conn.ExecContext(ctx, sqliteBusy+" = "+strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	return err
}
