package idempgx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
)

// errDuplicate ends InTx's transaction when the event was processed before.
var errDuplicate = errors.New("idempgx: duplicate event")

// InTx runs fn at most once per (consumer, eventID), as sqllayer's InTx
// does, in a pgx.Tx of the tier's pool: it begins the transaction, marks
// the event processed in it, runs fn with it and commits, so that the mark
// and fn's writes (sqlc's queries.WithTx(tx), or pgx by hand) commit
// together or not at all.
//
// A duplicate (the event's row exists and has not expired) returns
// duplicate=true and nil without running fn. An error from fn rolls back
// the mark with fn's writes and is returned as it is: a redelivery runs fn
// again. A deadlock or serialization failure rolls back and runs it all
// again, fn included, up to the tier's retry count (sqllayer.WithRetries),
// then the error wraps sqllayer.ErrConflict. fn must not commit or roll
// back tx.
func (l *Layer) InTx(ctx context.Context, consumer, eventID string, fn func(ctx context.Context, tx pgx.Tx) error) (duplicate bool, err error) {
	err = l.Retry(ctx, func(ctx context.Context) error {
		tx, err := l.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		dup, err := l.MarkProcessed(ctx, l.Tx(tx), consumer, eventID)
		if err != nil {
			return err
		}
		if dup {
			return errDuplicate
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if errors.Is(err, errDuplicate) {
		return true, nil
	}
	return false, err
}

// TxFrom returns, as a pgx.Tx, the transaction of the atomic execution ctx
// belongs to: the context a tiered.Store made WithAtomic over a Layer of
// this package (or any sqllayer.Layer on pgx's database/sql driver) gives
// its function. Run the work's queries in it (sqlc's queries.WithTx(tx)):
// they commit with the claim and the completion, in the Store's one
// COMMIT, or not at all. ok is false outside an atomic execution, or when
// the tier's driver is not pgx.
//
// The Store commits and rolls back: the pgx.Tx's Commit and Rollback are
// refused (idem.ErrConfig) and change nothing. Begin opens a savepoint, as
// a pgx.Tx's Begin does (its Rollback undoes the savepoint alone, its
// Commit releases it). LargeObjects is not available on it.
func TxFrom(ctx context.Context) (tx pgx.Tx, ok bool) {
	if _, in := sqllayer.TxFrom(ctx); !in {
		return nil, false
	}
	var conn *pgx.Conn
	err := sqllayer.RawFrom(ctx, func(driverConn any) error {
		c, isPgx := driverConn.(*stdlib.Conn)
		if !isPgx {
			return fmt.Errorf("idempgx: the tier's driver is %T, not pgx", driverConn)
		}
		conn = c.Conn()
		return nil
	})
	if err != nil || conn == nil {
		return nil, false
	}
	return &atomicTx{conn: conn}, true
}

// atomicTx is an atomic execution's transaction as a pgx.Tx: the
// statements of the connection that holds it, the transaction's ends left
// to the Store. A savepoint within it is an atomicTx with a name.
type atomicTx struct {
	conn      *pgx.Conn
	savepoint string      // "" for the execution's transaction itself
	closed    atomic.Bool // a savepoint's, once committed or rolled back
}

var _ pgx.Tx = (*atomicTx)(nil)

// atomicSavepoints names the savepoints of atomic executions apart.
var atomicSavepoints atomic.Uint64

// errStoreEnds is the answer to a Commit or Rollback of the execution's
// transaction.
var errStoreEnds = fmt.Errorf("%w: idempgx: the atomic execution's transaction is the Store's to commit or roll back: return nil to commit, an error to roll back", idem.ErrConfig)

// Begin opens a savepoint.
func (t *atomicTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed.Load() {
		return nil, pgx.ErrTxClosed
	}
	name := "idempgx_sp_" + strconv.FormatUint(atomicSavepoints.Add(1), 10)
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &atomicTx{conn: t.conn, savepoint: name}, nil
}

// Commit releases a savepoint; the execution's transaction refuses it.
func (t *atomicTx) Commit(ctx context.Context) error {
	if t.savepoint == "" {
		return errStoreEnds
	}
	if !t.closed.CompareAndSwap(false, true) {
		return pgx.ErrTxClosed
	}
	_, err := t.conn.Exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
	return err
}

// Rollback rolls a savepoint back; the execution's transaction refuses
// it. A savepoint already ended answers pgx.ErrTxClosed, as pgx's do, so
// that a deferred Rollback after a Commit is harmless.
func (t *atomicTx) Rollback(ctx context.Context) error {
	if t.savepoint == "" {
		return errStoreEnds
	}
	if !t.closed.CompareAndSwap(false, true) {
		return pgx.ErrTxClosed
	}
	if _, err := t.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.savepoint); err != nil {
		return err
	}
	_, err := t.conn.Exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
	return err
}

func (t *atomicTx) open() error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	return nil
}

// CopyFrom is the connection's, in the transaction.
func (t *atomicTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.open(); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// SendBatch is the connection's, in the transaction.
func (t *atomicTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is not available in an atomic execution: its zero value
// fails every call.
func (t *atomicTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare is the connection's.
func (t *atomicTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.open(); err != nil {
		return nil, err
	}
	return t.conn.Prepare(ctx, name, sql)
}

// Exec is the connection's, in the transaction.
func (t *atomicTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.open(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

// Query is the connection's, in the transaction.
func (t *atomicTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.open(); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow is the connection's, in the transaction.
func (t *atomicTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// Conn is the connection that holds the transaction.
func (t *atomicTx) Conn() *pgx.Conn { return t.conn }
