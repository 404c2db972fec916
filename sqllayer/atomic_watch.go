package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// The bounds of an atomic execution's transaction. BEGIN and COMMIT get
// the Store's SQL timeout, as every statement of the layer does: a
// connection whose server stopped answering without closing it fails them
// then, instead of holding the caller until its own deadline. And while
// the work runs, the layer watches that the server still holds the
// transaction: the open transaction is the execution's lease, and when
// the server ends it (its backend killed, its connection dropped) another
// instance may claim the key and run it. The work's context is cancelled
// then, with idem.ErrLeaseLost, as a lost renewal cancels it in the other
// modes; its rows are gone with the transaction.
//
// The watch never touches the transaction's connection, which the work
// may be using (a result set open on it): it asks the server, on another
// connection of the pool, whether the session that holds the transaction
// is still in one. The session's id is read once per connection.

// errBound is the cause with which a BEGIN or a COMMIT that outlived the
// timeout ends the transaction's context.
var errBound = errors.New("sqllayer: the statement outlived the timeout")

// serverIDs is how many connections' server ids a Layer keeps before it
// forgets them all (a pool that opens new connections all the time).
const serverIDs = 1024

// serverID returns the server's id of conn's session (Postgres's backend
// pid, MySQL's and MariaDB's connection id), reading it once per
// connection; 0 where the dialect has none (SQLite, which no other process
// can cut). A read that fails is an error: without the id the watch could
// not tell a transaction the server ended, and the execution must not run
// unwatched.
func (l *Layer) serverID(ctx context.Context, conn bun.Conn, timeout time.Duration) (int64, error) {
	var q string
	switch l.dialect {
	case dialect.PG:
		q = "SELECT pg_backend_pid()"
	case dialect.MySQL:
		q = "SELECT CONNECTION_ID()"
	default:
		return 0, nil
	}
	var dc any
	if err := conn.Raw(func(c any) error { dc = c; return nil }); err != nil {
		return 0, err
	}
	if dc == nil {
		// No driver connection to key the cache by: every session would
		// share one id.
		return 0, errors.New("sqllayer: the driver gave no connection to read the session's id on")
	}
	if id, ok := l.servers.Load(dc); ok {
		return id.(int64), nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var id int64
	if err := conn.QueryRowContext(ctx, q).Scan(&id); err != nil {
		return 0, fmt.Errorf("sqllayer: reading the session's id, which the watch of an atomic execution asks the server about: %w", err)
	}
	if l.serverCount.Add(1) > serverIDs {
		l.servers.Clear()
		l.serverCount.Store(1)
	}
	l.servers.Store(dc, id)
	return id, nil
}

// beginBounded begins conn's transaction in ctx (the transaction's; end ends
// it), BEGIN bounded by timeout (0: by ctx alone).
func beginBounded(ctx context.Context, end context.CancelCauseFunc, conn bun.Conn, timeout time.Duration) (bun.Tx, error) {
	if timeout <= 0 {
		return conn.BeginTx(ctx, nil)
	}
	bound := time.AfterFunc(timeout, func() { end(errBound) })
	tx, err := conn.BeginTx(ctx, nil)
	if bound.Stop() {
		return tx, err
	}
	if err == nil {
		_ = tx.Rollback()
	}
	return bun.Tx{}, fmt.Errorf("sqllayer: BEGIN got no answer within the timeout (%v): %w", timeout, context.DeadlineExceeded)
}

// rollback rolls tx back, ROLLBACK bounded by timeout (0: by its context
// alone): past it, the transaction's context ends (end), and the driver
// gives up the connection. Then end ends the context in any case. It
// returns ROLLBACK's error: the transaction may still be open then.
func rollback(tx bun.Tx, end context.CancelCauseFunc, timeout time.Duration) error {
	if timeout > 0 {
		bound := time.AfterFunc(timeout, func() { end(errBound) })
		defer bound.Stop()
	}
	err := tx.Rollback()
	end(nil)
	return err
}

// commit commits the transaction, COMMIT bounded by the timeout. An error
// leaves its outcome unknown.
func (a *atomicTx) commit() error {
	if g := a.session.guard; g != nil {
		g.ours.Store(true)
	}
	if a.timeout <= 0 {
		return a.tx.Commit()
	}
	bound := time.AfterFunc(a.timeout, func() { a.end(errBound) })
	err := a.tx.Commit()
	if !bound.Stop() && err != nil {
		return fmt.Errorf("sqllayer: COMMIT got no answer within the timeout (%v): %w", a.timeout, context.DeadlineExceeded)
	}
	return err
}

// errTxEnded and errTxUnconfirmed are the causes with which the watch
// cancels the work.
var (
	errTxEnded       = fmt.Errorf("%w: sqllayer: the server ended the atomic execution's transaction (its session is gone or out of the transaction): another instance may claim the key", idem.ErrLeaseLost)
	errTxUnconfirmed = fmt.Errorf("%w: sqllayer: the server did not confirm the atomic execution's transaction for a whole lease: another instance may claim the key", idem.ErrLeaseLost)
)

// watch checks every lease/3, until the returned function is called, that
// the server still holds the transaction: lost cancels the work when it
// does not (errTxEnded), or when no check could tell for a whole lease
// (errTxUnconfirmed). A check waits for a connection of the pool as any
// statement does, up to the timeout: a pool whose every connection stays
// busy for a whole lease confirms nothing, and the work is cancelled, as a
// transaction the server ended would be — the layer cannot tell them
// apart, and taking the silence for a yes would leave a stale owner
// running beside the instance that claimed the key after it. It does
// nothing where the session has no id. The returned function waits for a
// check under way, which it cuts short.
func (a *atomicTx) watch(lease time.Duration, lost context.CancelCauseFunc) (stop func()) {
	if a.server == 0 || lease <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		stopped   bool
		t         *time.Timer
		confirmed = time.Now()
	)
	every := max(lease/3, time.Millisecond)
	tick := func() {
		defer wg.Done()
		alive, known := a.l.holdsTx(ctx, a.server, a.timeout)
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		switch {
		case known && !alive:
			lost(errTxEnded)
			return
		case known:
			confirmed = time.Now()
		case time.Since(confirmed) >= lease:
			lost(errTxUnconfirmed)
			return
		}
		wg.Add(1)
		t.Reset(every)
	}
	mu.Lock()
	wg.Add(1)
	t = time.AfterFunc(every, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		if t.Stop() {
			wg.Done() // the tick that will not run
		}
		mu.Unlock()
		cancel()
		wg.Wait()
	}
}

// holdsTx asks the server, on a connection of the pool, whether the
// session id is still in a transaction. known is false when the server
// did not answer (a timeout, a broken connection); a check the server
// refuses (no privilege to see sessions) says alive, as nothing can be
// told then.
func (l *Layer) holdsTx(ctx context.Context, id int64, timeout time.Duration) (alive, known bool) {
	var q string
	switch l.dialect {
	case dialect.PG:
		q = "SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND xact_start IS NOT NULL"
	case dialect.MySQL:
		q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
	default:
		return true, true
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var n int64
	err := l.db.NewRaw(q, id).Scan(ctx, &n)
	switch {
	case err == nil:
		return n > 0, true
	case ctx.Err() != nil:
		return false, false
	}
	switch classify(err, l.dialect) {
	case kindUnavailable, kindBroken:
		return false, false
	}
	return true, true
}
