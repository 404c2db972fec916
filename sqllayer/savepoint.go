package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// savepoints names each savepoint of the process apart, so that nested
// ones never release each other.
var savepoints atomic.Uint64

// Savepoint runs fn inside a savepoint of tx, the caller's transaction of
// any type (a reservation's, or the atomic execution's from TxFrom): when
// fn returns an error, what fn wrote is rolled back to the savepoint and tx
// goes on as it was before fn, usable; fn's error is returned as it is.
// When fn returns nil the savepoint is released and fn's writes stay in tx.
//
// It is for the statement that may fail by design inside a transaction
// that must go on: the insert that hits the business's own unique key
// (UNIQUE (provider, external_payment_id)) when the payment exists already.
// On Postgres such a failure aborts the whole transaction — every later
// statement, idem's completion included, is refused — unless it ran under a
// savepoint; MariaDB and SQLite undo the failed statement alone, and the
// savepoint costs them little. Tell the failure apart with IsUnique:
//
//	err := sqllayer.Savepoint(ctx, tx, func(ctx context.Context) error {
//		_, err := tx.ExecContext(ctx, insertPayment, provider, externalID, amount)
//		return err
//	})
//	switch {
//	case sqllayer.IsUnique(err):
//		// the payment exists: read it and answer with it, in tx
//	case err != nil:
//		return err
//	}
//
// fn writes through tx itself (or through code holding it, such as sqlc's
// queries.WithTx(tx)). A savepoint statement that fails is returned,
// joined with fn's error when there is one.
func Savepoint(ctx context.Context, tx Tx, fn func(ctx context.Context) error) error {
	if tx == nil {
		return fmt.Errorf("%w: sqllayer: Savepoint: no transaction (nil)", idem.ErrConfig)
	}
	name := "idem_sp_" + strconv.FormatUint(savepoints.Add(1), 10)
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return txDone(err)
	}
	if err := fn(ctx); err != nil {
		// A context that ended must not keep the savepoint from being
		// undone: the transaction is the caller's to go on with.
		undo := context.WithoutCancel(ctx)
		if _, rerr := tx.ExecContext(undo, "ROLLBACK TO SAVEPOINT "+name); rerr != nil {
			return errors.Join(err, fmt.Errorf("sqllayer: Savepoint: rollback to the savepoint: %w", rerr))
		}
		if _, rerr := tx.ExecContext(undo, "RELEASE SAVEPOINT "+name); rerr != nil {
			return errors.Join(err, fmt.Errorf("sqllayer: Savepoint: release: %w", rerr))
		}
		return err
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("sqllayer: Savepoint: release: %w", err)
	}
	return nil
}

// IsUnique reports whether err, an error of any of the tier's drivers
// (pgx, go-sql-driver/mysql, modernc.org/sqlite), or one wrapping it, is a
// unique or primary key violation: the answer a business's own unique key
// gives a second insert of the same thing (see Savepoint).
func IsUnique(err error) bool {
	for _, d := range []dialect.Name{dialect.PG, dialect.MySQL, dialect.SQLite} {
		if classify(err, d) == kindUnique {
			return true
		}
	}
	return false
}
