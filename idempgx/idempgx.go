package idempgx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
)

// Layer is idem's SQL tier on a *pgxpool.Pool: a *sqllayer.Layer (every
// method of which it has) whose statements run on the pool's connections,
// plus what pgx's types need: Tx, InTx, Close. Give it to tiered.WithSQL.
type Layer struct {
	*sqllayer.Layer
	pool *pgxpool.Pool
	db   *sql.DB
	conf *pgx.ConnConfig
}

// New returns the SQL tier on pool, configured by opts as sqllayer.New
// is (table names, retries, event retention…). It does no I/O: call Init
// to create the tables, or apply sqllayer.DDL's. The tier borrows the
// pool's connections for each statement and keeps none idle, so the pool's
// size bounds the team's queries and idem's together. Close releases what
// New made, never the pool.
func New(pool *pgxpool.Pool, opts ...sqllayer.Option) (*Layer, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: idempgx: New: give a *pgxpool.Pool (got nil)", idem.ErrConfig)
	}
	db := stdlib.OpenDBFromPool(pool)
	l, err := sqllayer.New(bun.NewDB(db, pgdialect.New()), opts...)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Layer{Layer: l, pool: pool, db: db, conf: pool.Config().ConnConfig}, nil
}

// Close releases the database/sql handle New opened over the pool; the
// pool stays open, the caller's to close.
func (l *Layer) Close() error { return l.db.Close() }

// Unwrap returns the sqllayer.Layer beneath, which a reservation's
// completion recognizes as the tier that holds it.
func (l *Layer) Unwrap() idem.Layer { return l.Layer }

// Tx adapts tx, a transaction of the team's pgx code (pool.Begin, or the
// pgx.Tx sqlc's WithTx takes), to the sqllayer.Tx that the in-transaction
// APIs take: CompleteReservation, CompleteTx, MarkProcessed,
// MarkProcessedBatch, AdvanceVersion, Version, idemwatermill.Complete.
// idem's statements then run in tx, with the team's.
//
// A tx on another database than the tier's pool (another host, port,
// database or user) is refused at its first statement, before anything is
// written, with an error wrapping idem.ErrConfig; so is a nil tx, or one
// already committed or rolled back.
func (l *Layer) Tx(tx pgx.Tx) sqllayer.Tx {
	a := &adapter{tx: tx}
	switch {
	case tx == nil:
		a.refused = fmt.Errorf("%w: idempgx: no transaction (nil pgx.Tx)", idem.ErrConfig)
	case tx.Conn() == nil:
		a.refused = fmt.Errorf("%w: idempgx: the pgx.Tx has no connection", idem.ErrConfig)
	default:
		if err := l.same(tx.Conn().Config()); err != nil {
			a.refused = err
		}
	}
	return a
}

// same refuses a connection of another database than the pool's.
func (l *Layer) same(c *pgx.ConnConfig) error {
	p := l.conf
	if c.Host == p.Host && c.Port == p.Port && c.Database == p.Database && c.User == p.User {
		return nil
	}
	return fmt.Errorf("%w: idempgx: the transaction is on %s@%s:%d/%s, the tier on %s@%s:%d/%s: give a transaction of the tier's pool",
		idem.ErrConfig, c.User, c.Host, c.Port, c.Database, p.User, p.Host, p.Port, p.Database)
}

// adapter is a pgx.Tx as a sqllayer.NativeTx.
type adapter struct {
	tx      pgx.Tx
	refused error // set by Tx: every statement fails with it
}

var _ sqllayer.NativeTx = (*adapter)(nil)

// ExecContext runs query in the transaction.
func (a *adapter) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if a.refused != nil {
		return nil, a.refused
	}
	tag, err := a.tx.Exec(ctx, query, args...)
	if err != nil {
		return nil, translate(err)
	}
	return result(tag.RowsAffected()), nil
}

// QueryContext is not available: idem queries through QueryRows, and a
// pgx.Tx has no *sql.Rows.
func (a *adapter) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("idempgx: a pgx.Tx gives no *sql.Rows: query it with pgx")
}

// QueryRows runs query in the transaction.
func (a *adapter) QueryRows(ctx context.Context, query string, args ...any) (sqllayer.Rows, error) {
	if a.refused != nil {
		return nil, a.refused
	}
	rows, err := a.tx.Query(ctx, query, args...)
	if err != nil {
		return nil, translate(err)
	}
	return rowsOf{rows}, nil
}

// Dialect is Postgres's.
func (a *adapter) Dialect() dialect.Name { return dialect.PG }

// translate makes what pgx says of a transaction that ended the error
// database/sql says, which sqllayer explains.
func translate(err error) error {
	if errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("%w: %w", sql.ErrTxDone, err)
	}
	return err
}

// result is a statement's row count as a sql.Result.
type result int64

func (r result) LastInsertId() (int64, error) {
	return 0, errors.New("idempgx: no LastInsertId on Postgres")
}

func (r result) RowsAffected() (int64, error) { return int64(r), nil }

// rowsOf is pgx.Rows as sqllayer.Rows.
type rowsOf struct{ pgx.Rows }

func (r rowsOf) Err() error { return translate(r.Rows.Err()) }

func (r rowsOf) Close() error {
	r.Rows.Close()
	return translate(r.Rows.Err())
}
