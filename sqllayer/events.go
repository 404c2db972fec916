package sqllayer

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// errDuplicate ends InTx's transaction when the event was processed before.
var errDuplicate = errors.New("sqllayer: duplicate event")

// InTx runs fn at most once per (consumer, eventID): it inserts the
// processed-event row and runs fn in one transaction, so the check and fn's
// writes commit together or not at all.
//
//   - A duplicate (the row exists and has not expired) returns
//     duplicate=true and nil without running fn.
//   - An error from fn rolls back the row with fn's writes and is returned
//     as it is: a redelivery runs fn again.
//   - Concurrent deliveries of one event: the second INSERT waits for the
//     first transaction and then sees the duplicate (Postgres, MySQL); SQLite
//     runs one writer at a time.
//   - A deadlock or serialization failure anywhere in the transaction rolls
//     it back and runs it again, fn included, up to the retry count (see
//     WithRetries); then the error wraps ErrConflict. fn therefore runs more
//     than once only when no earlier run committed.
//
// The row is kept for the event retention (WithEventRetention); the janitor
// deletes it afterwards. The transaction uses the database's default
// isolation level. consumer and eventID are UTF-8 text of 1 to 255 bytes.
func (l *Layer) InTx(ctx context.Context, consumer, eventID string, fn func(ctx context.Context, tx bun.Tx) error) (duplicate bool, err error) {
	if err := l.checkEvent(consumer, eventID); err != nil {
		return false, err
	}
	err = l.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		dup, err := l.MarkProcessed(ctx, tx, consumer, eventID)
		if err != nil {
			return err
		}
		if dup {
			return errDuplicate
		}
		return fn(ctx, tx)
	})
	if errors.Is(err, errDuplicate) {
		return true, nil
	}
	return false, err
}

// MarkProcessed records (consumer, eventID) as processed inside the caller's
// transaction, for callers that already hold one: InTx without the
// transaction handling. duplicate is true when the event was processed
// before (its row exists and has not expired); the caller then rolls back
// or skips its work. Otherwise the row commits or rolls back with tx.
//
// It runs one INSERT that tolerates only the duplicate key (ON CONFLICT DO
// NOTHING; on MySQL a plain INSERT whose error 1062 means "duplicate"); a
// duplicate costs one more read, which asks whether the row has expired: an
// expired row is deleted and inserted again, so that a redelivery after the
// retention runs again. It never
// aborts tx on a duplicate, and it retries nothing inside tx: a deadlock
// gives ErrConflict.
func (l *Layer) MarkProcessed(ctx context.Context, tx Tx, consumer, eventID string) (duplicate bool, err error) {
	if err := l.checkEvent(consumer, eventID); err != nil {
		return false, err
	}
	q, err := l.inTx(tx)
	if err != nil {
		return false, err
	}
	dup, err := l.markProcessed(ctx, q, consumer, eventID)
	return dup, l.wrap("mark processed", txDone(err))
}

func (l *Layer) checkEvent(consumer, eventID string) error {
	if err := checkID("consumer", consumer); err != nil {
		return err
	}
	return checkID("event ID", eventID)
}

func (l *Layer) markProcessed(ctx context.Context, q querier, consumer, eventID string) (bool, error) {
	c, e := l.id(consumer), l.id(eventID)
	for revived := false; ; revived = true {
		n, err := affected(ctx, q, l.st.markEvent, c, e, micros(l.eventTTL))
		switch {
		case err == nil && n == 1:
			return false, nil
		case err != nil && classify(err, l.dialect) != kindUnique:
			return false, err
		case revived:
			return true, nil
		}
		// The row exists. A plain read asks whether it has expired: on MySQL
		// the failed INSERT holds a shared lock on the row, and concurrent
		// duplicates that all asked for an exclusive one would deadlock. A
		// row this transaction's snapshot cannot see committed after it
		// began: it is live.
		var expired bool
		found, err := queryOne(ctx, q, l.st.eventExpired, []any{c, e}, &expired)
		if err != nil || !found || !expired {
			return err == nil, err
		}
		// Expired, so absent: delete it and insert again, in this same
		// transaction.
		if _, err := affected(ctx, q, l.st.reviveEvent, c, e); err != nil {
			return false, err
		}
	}
}

// RunInTx runs fn in a transaction of the layer's *bun.DB and commits it when
// fn returns nil. When the database aborts it to resolve a deadlock or a
// serialization conflict, RunInTx rolls back and runs fn again, up to the
// retry count (WithRetries), then returns an error wrapping ErrConflict.
// Other errors from fn roll back and are returned as they are; a failed
// commit is translated like the layer's own errors (idem.ErrUnavailable when
// the server went away: the commit may or may not have happened). A panic in
// fn rolls back and panics on.
//
// It suits sync jobs around AdvanceVersion and any work that combines the
// layer's in-transaction calls with the caller's writes.
func (l *Layer) RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return l.Retry(ctx, func(ctx context.Context) error { return l.runTx(ctx, fn) })
}

// Retry runs tx, which runs one whole transaction (begin, statements,
// commit), and runs it again while the database aborts it to resolve a
// deadlock or a serialization conflict, as RunInTx does with bun: up to
// the retry count (WithRetries), then it returns an error wrapping
// ErrConflict. It is for transactions of other types than bun's (a *sql.Tx
// the caller begins, package idempgx's InTx over a pgx.Tx). Other errors
// are returned as they are.
func (l *Layer) Retry(ctx context.Context, tx func(ctx context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = tx(ctx)
		if err == nil || !l.conflict(err) {
			return err
		}
		if attempt >= l.retries {
			break
		}
		if perr := pause(ctx, attempt+1); perr != nil {
			break
		}
	}
	if errors.Is(err, ErrConflict) {
		return err
	}
	return fmt.Errorf("%w: transaction: %w", ErrConflict, err)
}

// runTx is one attempt of RunInTx.
func (l *Layer) runTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) (err error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return l.wrap("begin", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true
	return l.wrap("commit", tx.Commit())
}
