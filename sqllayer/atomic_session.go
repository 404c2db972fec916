package sqllayer

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// The session of an atomic execution. Two things the claim does to its
// connection must not reach the function's statements:
//
//   - The claim's bound on waiting for a lock is the claim's alone: the
//     function's own statements wait for their locks as they would in a
//     plain transaction, under the server's or the user's settings. On
//     Postgres the claim's statement sets lock_timeout for itself and puts
//     the value it found back once the insert is done (see atomicInsert);
//     on MariaDB the bound is the claim statement's own (SET STATEMENT …
//     FOR); on MySQL the session's value is saved, changed for the claim
//     and put back right after it; on SQLite the busy timeout is the
//     claim's bound and the DSN's again right after it.
//   - A transaction the server ends on its own must not turn the function's
//     later statements into statements that commit on their own. InnoDB
//     rolls a deadlock victim back whole (and a lock wait timeout, with
//     innodb_rollback_on_timeout): the session then runs in autocommit,
//     unless autocommit is off — which it is for the execution's length,
//     so those statements wait in a new transaction that the failed
//     completion rolls back. SQLite can roll a transaction back whole on
//     SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY or SQLITE_NOMEM: a commit
//     hook on the connection refuses every commit but the execution's own
//     while it runs. Postgres refuses every statement of an aborted
//     transaction (25P02) until its ROLLBACK.

// mysqlSaveSession saves the session's autocommit in @idem_autocommit and
// turns it off; on MySQL (not MariaDB) it also saves the session's
// innodb_lock_wait_timeout in @idem_lock_wait and sets it to secs, the
// claim's bound (MariaDB bounds the claim's statements themselves).
//
// On a Galera node (galera) it also saves the session's streaming
// replication settings and streams each row as it is written: the claim's
// row is then replicated and locked on every node while the work runs, so
// that a claim of the same key on another node waits for it as on one
// server. Without it two nodes' claims meet only at commit, when both
// works have run (one commits; what the other did outside its transaction,
// a call to a provider, happened twice).
func mysqlSaveSession(maria bool, secs int64, galera bool) string {
	if galera {
		return "SET @idem_autocommit = @@SESSION.autocommit, @idem_frag_unit = @@SESSION.wsrep_trx_fragment_unit, " +
			"@idem_frag_size = @@SESSION.wsrep_trx_fragment_size, SESSION autocommit = 0, " +
			"SESSION wsrep_trx_fragment_unit = 'rows', SESSION wsrep_trx_fragment_size = 1"
	}
	if maria {
		return "SET @idem_autocommit = @@SESSION.autocommit, SESSION autocommit = 0"
	}
	return "SET @idem_autocommit = @@SESSION.autocommit, @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION autocommit = 0, SESSION innodb_lock_wait_timeout = " + strconv.FormatInt(secs, 10)
}

// mysqlRestoreLockWait puts MySQL's saved lock wait back (see
// mysqlSaveSession).
const mysqlRestoreLockWait = "SET SESSION innodb_lock_wait_timeout = @idem_lock_wait"

// mysqlRestoreSession puts the saved settings back, once the execution's
// transaction has ended: setting autocommit on would commit one still open.
func mysqlRestoreSession(maria, galera bool) string {
	if galera {
		return "SET SESSION autocommit = @idem_autocommit, SESSION wsrep_trx_fragment_unit = @idem_frag_unit, " +
			"SESSION wsrep_trx_fragment_size = @idem_frag_size"
	}
	if maria {
		return "SET SESSION autocommit = @idem_autocommit"
	}
	return "SET SESSION autocommit = @idem_autocommit, SESSION innodb_lock_wait_timeout = @idem_lock_wait"
}

// mysqlBounded returns query bounded, on MariaDB, to wait secs seconds at
// most for a lock (SET STATEMENT … FOR): the bound ends with the statement.
func mysqlBounded(query string, secs int64) string {
	return "SET STATEMENT innodb_lock_wait_timeout = " + strconv.FormatInt(secs, 10) + " FOR " + query
}

// lockSeconds is a wait as InnoDB's lock wait takes it: whole seconds, at
// least one.
func lockSeconds(wait time.Duration) int64 {
	return int64(max((wait+time.Second-1)/time.Second, 1))
}

// isMariaDB reports whether the MySQL server is MariaDB, asking it once,
// on conn (a connection, or the pool).
func (l *Layer) isMariaDB(ctx context.Context, conn bun.IConn) (bool, error) {
	switch l.maria.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	var v string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, fmt.Errorf("sqllayer: reading the server's version: %w", err)
	}
	maria := strings.Contains(strings.ToLower(v), "mariadb")
	l.maria.Store(map[bool]int32{true: 1, false: 2}[maria])
	return maria, nil
}

// isGalera reports whether the server is a node of a Galera cluster
// (wsrep_on), asking it once, on conn. MySQL has no such variable: no.
func (l *Layer) isGalera(ctx context.Context, conn bun.IConn) (bool, error) {
	switch l.galera.Load() {
	case 1:
		return true, nil
	case 2:
		return false, nil
	}
	var on bool
	if err := conn.QueryRowContext(ctx, "SELECT @@wsrep_on = 1").Scan(&on); err != nil {
		if n, ok := mysqlNumber(err); !ok || n != 1193 { // ER_UNKNOWN_SYSTEM_VARIABLE
			return false, fmt.Errorf("sqllayer: asking whether the server is a Galera node: %w", err)
		}
	}
	l.galera.Store(map[bool]int32{true: 1, false: 2}[on])
	return on, nil
}

// commitGuard refuses, through SQLite's commit hook, every commit on one
// connection but the atomic execution's own.
type commitGuard struct {
	conn  bun.Conn
	ours  atomic.Bool // the execution's COMMIT is under way
	unset func()
}

// guardCommits installs the commit hook on conn (modernc.org/sqlite's
// RegisterCommitHook, found by its shape: the layer links no driver). A
// driver without one gets no guard: ok false.
func guardCommits(conn bun.Conn) (g *commitGuard, ok bool, err error) {
	g = &commitGuard{conn: conn}
	err = conn.Raw(func(dc any) error {
		m := reflect.ValueOf(dc).MethodByName("RegisterCommitHook")
		if !m.IsValid() || m.Type().NumIn() != 1 {
			return nil
		}
		in := m.Type().In(0)
		if in.Kind() != reflect.Func || in.NumIn() != 0 || in.NumOut() != 1 || in.Out(0).Kind() != reflect.Int32 {
			return nil
		}
		hook := reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
			refuse := int32(1)
			if g.ours.Load() {
				refuse = 0
			}
			return []reflect.Value{reflect.ValueOf(refuse).Convert(in.Out(0))}
		})
		m.Call([]reflect.Value{hook})
		g.unset = func() { m.Call([]reflect.Value{reflect.Zero(in)}) }
		ok = true
		return nil
	})
	return g, ok, err
}

// remove takes the hook off the connection.
func (g *commitGuard) remove() {
	if g == nil || g.unset == nil {
		return
	}
	_ = g.conn.Raw(func(any) error { g.unset(); return nil })
}

// restoreLockBound puts back, once the claim is made, what the claim
// changed for its own wait (see the comment at the top of this file);
// old is the Postgres lock_timeout the claim found, when its statement
// did not put it back itself (a takeover).
func (a *atomicTx) restoreLockBound(ctx context.Context, old *string) error {
	l := a.l
	var err error
	switch {
	case l.dialect == dialect.PG && old != nil:
		_, err = a.q.exec(ctx, "SELECT set_config('lock_timeout', '"+strings.ReplaceAll(*old, "'", "''")+"', true)")
	case l.dialect == dialect.MySQL && !a.session.maria:
		_, err = a.q.exec(ctx, mysqlRestoreLockWait)
	case l.sqlite:
		_, err = a.q.exec(ctx, sqliteBusy+" = "+strconv.FormatInt(l.busy.Load(), 10))
	}
	return err
}
