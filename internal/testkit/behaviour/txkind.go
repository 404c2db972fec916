package behaviour

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/sqllayer"
)

// ChargeTx is the charge handler's transaction, as a TxKind holds it.
type ChargeTx interface {
	// Exec runs a statement written with ? placeholders.
	Exec(ctx context.Context, query string, args ...any) error
	// Idem is what idem's in-transaction APIs take for it.
	Idem() sqllayer.Tx
}

// TxKind is the type of the transaction the charge handler writes its
// charge and idem's completion in: bun.Tx (BunTx, the default), a *sql.Tx
// (SQLTx), or another driver's own (the pgx module's tests give theirs).
type TxKind struct {
	// Name names the kind in subtests.
	Name string
	// Layer returns the SQL tier of one instance over st, as the Store
	// takes it, and the sqllayer.Layer the handler completes through (the
	// same layer, or the one it wraps); nil: the stack's own
	// (st.SQLLayer).
	Layer func(t *testing.T, st *stacktest.Stack) (idem.Layer, *sqllayer.Layer)
	// Run runs fn in a new transaction on db's database, committing when
	// fn returns nil and rolling back otherwise; on SQLite its connection
	// enforces foreign keys.
	Run func(ctx context.Context, db *bun.DB, fn func(ctx context.Context, tx ChargeTx) error) error
	// From returns the transaction of the atomic execution ctx belongs to.
	From func(ctx context.Context, db *bun.DB) (ChargeTx, bool)
}

// BunTx is the bun kind: bun.RunInTx, and the atomic execution's *sql.Tx
// through bun's Conn.
var BunTx = TxKind{
	Name: "bun.Tx",
	Run: func(ctx context.Context, db *bun.DB, fn func(ctx context.Context, tx ChargeTx) error) error {
		body := func(ctx context.Context, tx bun.Tx) error { return fn(ctx, bunCharge{db: db, tx: tx}) }
		if db.Dialect().Name() != dialect.SQLite {
			return db.RunInTx(ctx, nil, body)
		}
		// SQLite checks a deferred foreign key at COMMIT only where the
		// connection enforces foreign keys.
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = ON"); err != nil {
			return err
		}
		return conn.RunInTx(ctx, nil, body)
	},
	From: func(ctx context.Context, db *bun.DB) (ChargeTx, bool) {
		tx, ok := sqllayer.TxFrom(ctx)
		if !ok {
			return nil, false
		}
		return bunCharge{db: db, tx: tx}, true
	},
}

// bunCharge runs statements through bun on tx (a bun.Tx, or a *sql.Tx
// through Conn).
type bunCharge struct {
	db *bun.DB
	tx bun.IConn
}

func (b bunCharge) Exec(ctx context.Context, query string, args ...any) error {
	_, err := b.db.NewRaw(query, args...).Conn(b.tx).Exec(ctx)
	return err
}

func (b bunCharge) Idem() sqllayer.Tx { return b.tx }

// SQLTx is the database/sql kind: a *sql.Tx begun on the pool beneath bun
// (pgx's stdlib driver, go-sql-driver/mysql or modernc.org/sqlite), with
// the driver's own placeholders, as sqlc's and sqlx's code runs.
var SQLTx = TxKind{
	Name: "*sql.Tx",
	Run: func(ctx context.Context, db *bun.DB, fn func(ctx context.Context, tx ChargeTx) error) error {
		conn, err := db.DB.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		pg := db.Dialect().Name() == dialect.PG
		if db.Dialect().Name() == dialect.SQLite {
			if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = ON"); err != nil {
				return err
			}
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(ctx, sqlCharge{tx: tx, pg: pg}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	},
	From: func(ctx context.Context, db *bun.DB) (ChargeTx, bool) {
		tx, ok := sqllayer.TxFrom(ctx)
		if !ok {
			return nil, false
		}
		return sqlCharge{tx: tx, pg: db.Dialect().Name() == dialect.PG}, true
	},
}

// sqlCharge runs statements on a *sql.Tx; pg: with $N placeholders.
type sqlCharge struct {
	tx *sql.Tx
	pg bool
}

func (s sqlCharge) Exec(ctx context.Context, query string, args ...any) error {
	if s.pg {
		query = Dollars(query)
	}
	_, err := s.tx.ExecContext(ctx, query, args...)
	return err
}

func (s sqlCharge) Idem() sqllayer.Tx { return s.tx }

// Dollars rewrites the ? placeholders of query as $1, $2…; query holds no
// other question mark.
func Dollars(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
