package sqllayer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	bunschema "github.com/uptrace/bun/schema"

	"github.com/idemkit/idem"
)

// Tx is the caller's transaction that the in-transaction APIs write in
// (CompleteReservation, CompleteTx, MarkProcessed, MarkProcessedBatch,
// AdvanceVersion, Version): idem's row and the caller's own rows then
// commit together, or not at all.
//
// *sql.Tx satisfies it, over any of the tier's drivers (pgx's stdlib,
// go-sql-driver/mysql, modernc.org/sqlite), and so does what holds one:
// sqlx's *sqlx.Tx, the *sql.Tx that sqlc's database/sql mode and gorm's
// transactions run on. bun.Tx and every bun.IDB satisfy it too. A
// transaction of a driver without database/sql is adapted to it, and then
// idem queries through the adapter's own methods (see NativeTx): package
// idempgx does so for pgx.Tx.
//
// The statements are the tier's own, one text per dialect whatever the
// transaction's type. The transaction must be on the tier's database, open,
// and not aborted: one that is committed or rolled back gives an error
// wrapping idem.ErrConfig, before anything is written.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// NativeTx is a Tx that adapts a transaction of a driver without
// database/sql, for the modules that adapt one (package idempgx adapts
// pgx.Tx); applications do not implement it. idem runs its statements
// through ExecContext and QueryRows, never QueryContext, with the
// placeholders of Dialect's driver ($1, $2… on Postgres) and arguments of
// the types database/sql would pass (nil, int64, bool, []byte, string).
type NativeTx interface {
	Tx
	// QueryRows runs a query and returns its rows, which idem scans into
	// *[]byte, *int64, *bool, sql.NullInt64, sql.NullBool and sql.Scanner
	// values.
	QueryRows(ctx context.Context, query string, args ...any) (Rows, error)
	// Dialect is the SQL dialect the transaction speaks; it must be the
	// tier's.
	Dialect() dialect.Name
}

// Rows is what NativeTx.QueryRows returns: the part of *sql.Rows that
// idem reads.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// querier is what the layer runs statements on: its pool, or a caller's
// transaction of any type.
type querier interface {
	exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	query(ctx context.Context, query string, args ...any) (Rows, error)
}

// direct runs statements through database/sql's methods, as given: the
// driver's own placeholders (a *sql.DB, *sql.Tx or *sql.Conn of a native
// dialect), or ?N for a bun.IDB, which formats them itself.
type direct struct{ q Tx }

func (d direct) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.q.ExecContext(ctx, query, args...)
}

func (d direct) query(ctx context.Context, query string, args ...any) (Rows, error) {
	return d.q.QueryContext(ctx, query, args...)
}

// formatted runs statements on a caller's transaction of MySQL given as a
// plain *sql.Tx: bun's formatter writes the arguments into the text, as a
// bun.Tx would, so that the server runs it in one round trip.
type formatted struct {
	q   Tx
	gen interface {
		FormatQuery(query string, args ...any) string
	}
}

func (f formatted) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return f.q.ExecContext(ctx, f.gen.FormatQuery(query, args...))
}

func (f formatted) query(ctx context.Context, query string, args ...any) (Rows, error) {
	return f.q.QueryContext(ctx, f.gen.FormatQuery(query, args...))
}

// native runs statements on an adapter's transaction.
type native struct{ q NativeTx }

func (n native) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return n.q.ExecContext(ctx, query, args...)
}

func (n native) query(ctx context.Context, query string, args ...any) (Rows, error) {
	return n.q.QueryRows(ctx, query, args...)
}

// pool returns the querier of the layer's own statements.
func (l *Layer) pool() querier { return l.q }

// on returns the querier for a caller's transaction (or connection, or
// pool: Version and AdvanceVersion take those too).
func (l *Layer) on(tx Tx) (querier, error) {
	if b, ok := tx.(interface{ Dialect() bunschema.Dialect }); ok && b.Dialect() != nil && b.Dialect().Name() != l.dialect {
		return nil, fmt.Errorf("%w: sqllayer: a %s transaction (%T) for a tier on %s: give a transaction on the tier's database", idem.ErrConfig, b.Dialect().Name(), tx, l.dialect)
	}
	switch d := tx.(type) {
	case nil:
		return nil, fmt.Errorf("%w: sqllayer: no transaction (nil): give the transaction the work writes in", idem.ErrConfig)
	case NativeTx:
		if got := d.Dialect(); got != l.dialect {
			return nil, fmt.Errorf("%w: sqllayer: a %s transaction (%T) for a tier on %s: give a transaction on the tier's database", idem.ErrConfig, got, tx, l.dialect)
		}
		return native{d}, nil
	case *bun.DB:
		if l.native {
			return direct{d.DB}, nil
		}
	case bun.Tx:
		if l.native {
			return direct{d.Tx}, nil
		}
	case *bun.Tx:
		if l.native {
			return direct{d.Tx}, nil
		}
	case bun.Conn:
		if l.native {
			return direct{d.Conn}, nil
		}
	case *bun.Conn:
		if l.native {
			return direct{d.Conn}, nil
		}
	default:
		if _, isBun := tx.(bun.IDB); isBun {
			// A bun.IDB of another kind formats ?N itself.
			if l.native {
				return nil, fmt.Errorf("%w: sqllayer: unsupported bun.IDB %T: give a bun.Tx, *bun.DB, bun.Conn or the *sql.Tx beneath", idem.ErrConfig, tx)
			}
			return direct{tx}, nil
		}
		if !l.native {
			return formatted{q: tx, gen: l.db.QueryGen()}, nil
		}
	}
	return direct{tx}, nil
}

// inTx is on for the APIs that write in the caller's transaction: a pool
// there would commit idem's row on its own, apart from the caller's.
func (l *Layer) inTx(tx Tx) (querier, error) {
	if pooled(tx) {
		return nil, fmt.Errorf("%w: sqllayer: a pool (%T) where the caller's transaction belongs: idem's row would commit on its own; give the transaction the business rows are written in", idem.ErrConfig, tx)
	}
	return l.on(tx)
}

// txDone translates what a transaction that already ended says.
func txDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: sqllayer: the transaction has already been committed or rolled back: call it before the commit, in the open transaction: %w", idem.ErrConfig, err)
	}
	return err
}
