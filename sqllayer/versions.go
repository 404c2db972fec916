package sqllayer

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
)

// AdvanceVersion is the gate of a sync job: it stores version for (source,
// externalID) if it is newer than the stored one, or if none is stored, and
// reports whether it did. newer is true exactly once per version that moves
// the record forward: apply the external change then, in the same
// transaction. An equal (a duplicate delivery) or older version (a late,
// out-of-order one) gives false and changes nothing.
//
// Call it inside the transaction that applies the change (db is a Tx: *sql.Tx, bun.Tx, idempgx.Tx…),
// so that the stored version and the applied change commit together; it
// holds the row's lock until that transaction ends, so concurrent deliveries
// for one record apply in version order. With db a pool (*sql.DB, *bun.DB) it runs on its
// own and a deadlock is retried; inside a transaction a deadlock (possible on
// MySQL when first deliveries race) gives ErrConflict: run the transaction
// again (RunInTx does).
//
// It is one statement. Postgres and SQLite: INSERT … ON CONFLICT (source,
// external_id) DO UPDATE SET version = excluded.version WHERE stored <
// excluded, whose row count is 1 for an insert or an update and 0 otherwise.
// MySQL: INSERT … ON DUPLICATE KEY UPDATE that keeps GREATEST(stored, new),
// whose affected-row count is 1 (inserted), 2 (updated) or 0 (unchanged); it
// needs the driver's default clientFoundRows=false.
func (l *Layer) AdvanceVersion(ctx context.Context, db Tx, source, externalID string, version int64) (newer bool, err error) {
	if err := l.checkSource(source, externalID); err != nil {
		return false, err
	}
	q, err := l.on(db)
	if err != nil {
		return false, err
	}
	run := func() error {
		n, err := affected(ctx, q, l.st.advance, l.id(source), l.id(externalID), version)
		newer = n > 0
		return err
	}
	if pooled(db) {
		err = l.retry(ctx, run)
	} else {
		err = run()
	}
	return newer, l.wrap("advance version", txDone(err))
}

// Version returns the version stored for (source, externalID), or
// idem.ErrNotFound.
func (l *Layer) Version(ctx context.Context, db Tx, source, externalID string) (int64, error) {
	if err := l.checkSource(source, externalID); err != nil {
		return 0, err
	}
	q, err := l.on(db)
	if err != nil {
		return 0, err
	}
	var v int64
	found, err := queryOne(ctx, q, l.st.version, []any{l.id(source), l.id(externalID)}, &v)
	if err != nil {
		return 0, l.wrap("version", txDone(err))
	}
	if !found {
		return 0, idem.ErrNotFound
	}
	return v, nil
}

func (l *Layer) checkSource(source, externalID string) error {
	if err := checkID("source", source); err != nil {
		return err
	}
	return checkID("external ID", externalID)
}

// pooled reports whether db is a pool, whose statements are each a
// transaction of their own that the layer may run again.
func pooled(db Tx) bool {
	switch db.(type) {
	case *bun.DB, *sql.DB:
		return true
	}
	return false
}
