package idempgx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
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
	t := &atomicTx{ctx: ctx}
	if t.raw(func(*pgx.Conn) error { return nil }) != nil {
		return nil, false
	}
	return t, true
}

// atomicTx is an atomic execution's transaction as a pgx.Tx: the
// statements of the connection that holds it, the transaction's ends left
// to the Store. A savepoint within it is an atomicTx with a name.
//
// Every statement runs while it holds the driver's connection (see raw),
// as database/sql's own do, and reads its rows in full before it lets the
// connection go: the Store's transaction may be rolled back by
// database/sql when its context ends, and that must wait for a statement
// under way rather than use the connection beside it.
type atomicTx struct {
	ctx       context.Context // the execution's, which sqllayer.RawFrom finds it by
	savepoint string          // "" for the execution's transaction itself
	closed    atomic.Bool     // a savepoint's, once committed or rolled back
}

var _ pgx.Tx = (*atomicTx)(nil)

// raw runs f with the pgx connection beneath the execution's transaction,
// holding it.
func (t *atomicTx) raw(f func(conn *pgx.Conn) error) error {
	return sqllayer.RawFrom(t.ctx, func(driverConn any) error {
		c, isPgx := driverConn.(*stdlib.Conn)
		if !isPgx {
			return fmt.Errorf("%w: idempgx: the tier's driver is %T, not pgx", idem.ErrConfig, driverConn)
		}
		return f(c.Conn())
	})
}

// exec runs one statement that returns no rows.
func (t *atomicTx) exec(ctx context.Context, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = t.raw(func(conn *pgx.Conn) error {
		tag, err = conn.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// atomicSavepoints names the savepoints of atomic executions apart.
var atomicSavepoints atomic.Uint64

// errStoreEnds is the answer to a Commit or Rollback of the execution's
// transaction.
var errStoreEnds = fmt.Errorf("%w: idempgx: the atomic execution's transaction is the Store's to commit or roll back: return nil to commit, an error to roll back", idem.ErrConfig)

// errNoBatch is SendBatch's answer: its results are read after it returns,
// when the connection is no longer held.
var errNoBatch = fmt.Errorf("%w: idempgx: SendBatch is not available in an atomic execution: send the statements one by one", idem.ErrConfig)

// Begin opens a savepoint.
func (t *atomicTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.open(); err != nil {
		return nil, err
	}
	name := "idempgx_sp_" + strconv.FormatUint(atomicSavepoints.Add(1), 10)
	if _, err := t.exec(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &atomicTx{ctx: t.ctx, savepoint: name}, nil
}

// Commit releases a savepoint; the execution's transaction refuses it.
func (t *atomicTx) Commit(ctx context.Context) error {
	if t.savepoint == "" {
		return errStoreEnds
	}
	if !t.closed.CompareAndSwap(false, true) {
		return pgx.ErrTxClosed
	}
	_, err := t.exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
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
	if _, err := t.exec(ctx, "ROLLBACK TO SAVEPOINT "+t.savepoint); err != nil {
		return err
	}
	_, err := t.exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
	return err
}

func (t *atomicTx) open() error {
	if t.closed.Load() {
		return pgx.ErrTxClosed
	}
	return nil
}

// CopyFrom is the connection's, in the transaction.
func (t *atomicTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (n int64, err error) {
	if err := t.open(); err != nil {
		return 0, err
	}
	err = t.raw(func(conn *pgx.Conn) error {
		n, err = conn.CopyFrom(ctx, table, columns, src)
		return err
	})
	return n, err
}

// SendBatch is not available in an atomic execution: every result it
// gives fails with an error wrapping idem.ErrConfig.
func (t *atomicTx) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return failedBatch{} }

// LargeObjects is not available in an atomic execution: its zero value
// fails every call.
func (t *atomicTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare is the connection's.
func (t *atomicTx) Prepare(ctx context.Context, name, sql string) (d *pgconn.StatementDescription, err error) {
	if err := t.open(); err != nil {
		return nil, err
	}
	err = t.raw(func(conn *pgx.Conn) error {
		d, err = conn.Prepare(ctx, name, sql)
		return err
	})
	return d, err
}

// Exec is the connection's, in the transaction.
func (t *atomicTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.open(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.exec(ctx, sql, args...)
}

// Query runs the query in the transaction and reads its rows in full.
func (t *atomicTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.open(); err != nil {
		return nil, err
	}
	var out *readRows
	err := t.raw(func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		out = readAll(rows, conn)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueryRow is Query's first row.
func (t *atomicTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return firstRow{rows: rows, err: err}
}

// Conn is the connection that holds the transaction. Statements sent on
// it directly do not wait for the Store's rollback: use the pgx.Tx.
func (t *atomicTx) Conn() *pgx.Conn {
	var c *pgx.Conn
	_ = t.raw(func(conn *pgx.Conn) error { c = conn; return nil })
	return c
}

// readRows are a query's rows, read in full while the connection was
// held.
type readRows struct {
	conn    *pgx.Conn
	typeMap *pgtype.Map
	fields  []pgconn.FieldDescription
	values  [][][]byte
	tag     pgconn.CommandTag
	err     error
	at      int // the current row, -1 before the first
	closed  bool
}

// readAll reads rows to their end and closes them.
func readAll(rows pgx.Rows, conn *pgx.Conn) *readRows {
	defer rows.Close()
	r := &readRows{conn: conn, typeMap: conn.TypeMap(), at: -1}
	r.fields = append([]pgconn.FieldDescription(nil), rows.FieldDescriptions()...)
	for rows.Next() {
		raw := rows.RawValues()
		row := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				row[i] = append([]byte{}, v...)
			}
		}
		r.values = append(r.values, row)
	}
	rows.Close()
	r.err, r.tag = rows.Err(), rows.CommandTag()
	return r
}

func (r *readRows) Close() { r.closed = true }

func (r *readRows) Err() error { return r.err }

func (r *readRows) CommandTag() pgconn.CommandTag { return r.tag }

func (r *readRows) FieldDescriptions() []pgconn.FieldDescription { return r.fields }

func (r *readRows) Next() bool {
	if r.closed || r.err != nil || r.at+1 >= len(r.values) {
		r.closed = true
		return false
	}
	r.at++
	return true
}

func (r *readRows) Scan(dest ...any) error {
	if r.at < 0 || r.at >= len(r.values) {
		return errors.New("idempgx: Scan without a row (call Next first)")
	}
	return pgx.ScanRow(r.typeMap, r.fields, r.values[r.at], dest...)
}

func (r *readRows) Values() ([]any, error) {
	if r.at < 0 || r.at >= len(r.values) {
		return nil, errors.New("idempgx: Values without a row (call Next first)")
	}
	out := make([]any, len(r.fields))
	for i, buf := range r.values[r.at] {
		if buf == nil {
			continue
		}
		fd := &r.fields[i]
		if dt, ok := r.typeMap.TypeForOID(fd.DataTypeOID); ok {
			v, err := dt.Codec.DecodeValue(r.typeMap, fd.DataTypeOID, fd.Format, buf)
			if err != nil {
				return nil, err
			}
			out[i] = v
			continue
		}
		if fd.Format == pgx.TextFormatCode {
			out[i] = string(buf)
		} else {
			out[i] = append([]byte{}, buf...)
		}
	}
	return out, nil
}

func (r *readRows) RawValues() [][]byte {
	if r.at < 0 || r.at >= len(r.values) {
		return nil
	}
	return r.values[r.at]
}

func (r *readRows) Conn() *pgx.Conn { return r.conn }

// TypeMap is the connection's.
func (r *readRows) TypeMap() *pgtype.Map { return r.typeMap }

// firstRow is QueryRow's answer.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (f firstRow) Scan(dest ...any) error {
	if f.err != nil {
		return f.err
	}
	defer f.rows.Close()
	if !f.rows.Next() {
		if err := f.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	return f.rows.Scan(dest...)
}

// failedBatch is SendBatch's answer.
type failedBatch struct{}

func (failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errNoBatch }
func (failedBatch) Query() (pgx.Rows, error)         { return nil, errNoBatch }
func (failedBatch) QueryRow() pgx.Row                { return firstRow{err: errNoBatch} }
func (failedBatch) Close() error                     { return errNoBatch }

// Tx is nil: the batch began no transaction.
func (failedBatch) Tx() pgx.Tx { return nil }
