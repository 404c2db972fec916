package sqllayer

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/uptrace/bun/dialect"
)

// MUST AGREE with MarkProcessed (events.go): MarkProcessedBatch calls an
// event a duplicate exactly when MarkProcessed, called for each ID in
// turn, would. FuzzEventBatchAgreesWithSingle (batch_events_fuzz_test.go)
// compares them on any IDs under make test, with rows that live and rows
// that expire; TestMarkProcessedBatchAgreesWithSingle pins the IDs every
// encoding must carry.

// MaxEventBatch is the most event IDs one statement of MarkProcessedBatch
// carries; a longer batch is sent in chunks of this size.
const MaxEventBatch = 500

// MarkProcessedBatch records many events of one consumer as processed inside
// the caller's transaction, as MarkProcessed does one: for consumers that
// receive batches (a Kafka poll, an SQS receive). duplicates[i] is true when
// eventIDs[i] was processed before (its row exists and has not expired), or
// when it appeared earlier in eventIDs (the second is a duplicate of the
// first); the caller skips those and processes the rest in tx. The rows of
// the others commit or roll back with tx.
//
// It takes the IDs in sorted order (byte order), whatever order eventIDs
// has, so that concurrent batches that share IDs lock their rows in one
// order and wait for each other instead of deadlocking. It runs one
// multi-row INSERT per MaxEventBatch IDs that tolerates only the duplicate
// key (ON CONFLICT DO NOTHING on Postgres and SQLite; on MySQL a plain
// INSERT, and only when it reports a duplicate, a read of which IDs
// exist). On Postgres that one statement also reads whether the
// rows of the duplicates have expired; elsewhere duplicates cost one more
// read to ask it. An expired row is deleted and inserted again, as
// MarkProcessed does. It never aborts tx on a duplicate and retries
// nothing inside tx: a deadlock gives ErrConflict.
//
// consumer and every ID are validated as MarkProcessed validates them
// (UTF-8 text of 1 to 255 bytes); one invalid ID fails the call before
// anything is sent, with an error that names its index. An empty eventIDs
// returns an empty result.
func (l *Layer) MarkProcessedBatch(ctx context.Context, tx Tx, consumer string, eventIDs []string) (duplicates []bool, err error) {
	if err := checkID("consumer", consumer); err != nil {
		return nil, err
	}
	for i, id := range eventIDs {
		if err := checkID("event ID", id); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := l.inTx(tx)
	if err != nil {
		return nil, err
	}
	duplicates = make([]bool, len(eventIDs))
	// Each ID once: a repeat is a duplicate of its first.
	first := make(map[string]bool, len(eventIDs))
	ids := make([]int, 0, len(eventIDs))
	for i, id := range eventIDs {
		if first[id] {
			duplicates[i] = true
			continue
		}
		first[id] = true
		ids = append(ids, i)
	}
	// In one global order: the INSERTs lock the new rows in the order they
	// are given, and two transactions that take shared IDs in different
	// orders wait for each other (a deadlock, ErrConflict). Sorted, every
	// batch takes them in the same order, chunk after chunk.
	slices.SortFunc(ids, func(x, y int) int { return strings.Compare(eventIDs[x], eventIDs[y]) })
	for len(ids) > 0 {
		n := min(len(ids), MaxEventBatch)
		chunk := make([]string, n)
		for j, i := range ids[:n] {
			chunk[j] = eventIDs[i]
		}
		dup, err := l.markMany(ctx, q, consumer, chunk)
		if err != nil {
			return nil, l.wrap("mark processed", txDone(err))
		}
		for j, i := range ids[:n] {
			duplicates[i] = dup[j]
		}
		ids = ids[n:]
	}
	return duplicates, nil
}

// markMany marks distinct event IDs processed and reports which were
// duplicates.
func (l *Layer) markMany(ctx context.Context, q querier, consumer string, ids []string) ([]bool, error) {
	if l.dialect == dialect.MySQL {
		return l.markManyMySQL(ctx, q, consumer, ids)
	}
	dup := make([]bool, len(ids))
	idx := make([]int, len(ids))
	for j := range ids {
		idx[j] = j
	}
	taken, err := l.insertEvents(ctx, q, consumer, ids, idx)
	if err != nil {
		return nil, err
	}
	if len(taken) == 0 {
		return dup, nil
	}
	// The rows exist. Expired ones are absent: delete them and insert them
	// again, in this same transaction. A row this transaction's snapshot
	// cannot see committed after it began: it is live.
	var revive []int
	for _, j := range idx {
		switch exp, ok := taken[ids[j]]; {
		case !ok:
		case exp.Valid && exp.Bool:
			revive = append(revive, j)
		default:
			dup[j] = true
		}
	}
	if len(revive) == 0 {
		return dup, nil
	}
	if _, err := affected(ctx, q, l.bst.revive.get(len(revive)), l.eventArgs(consumer, nil, ids, revive)...); err != nil {
		return nil, err
	}
	if taken, err = l.insertEvents(ctx, q, consumer, ids, revive); err != nil {
		return nil, err
	}
	for _, j := range revive {
		_, dup[j] = taken[ids[j]]
	}
	return dup, nil
}

// insertEvents inserts the IDs idx where they are free (Postgres, SQLite)
// and returns those it did not insert, each with whether the row that
// holds it expired; invalid when this transaction cannot see that row,
// which then committed after its snapshot was taken (a live duplicate).
// On Postgres one statement does both; on SQLite a read follows the
// INSERT when it did not insert every ID.
func (l *Layer) insertEvents(ctx context.Context, q querier, consumer string, ids []string, idx []int) (map[string]sql.NullBool, error) {
	args := l.eventArgs(consumer, micros(l.eventTTL), ids, idx)
	taken := map[string]sql.NullBool{}
	if l.dialect == dialect.PG {
		err := queryEach(ctx, q, l.bst.mark.get(len(idx)), args, func(scan func(...any) error) error {
			var (
				id  []byte
				exp sql.NullBool
			)
			if err := scan(&id, &exp); err != nil {
				return err
			}
			taken[string(id)] = exp
			return nil
		})
		return taken, err
	}
	fresh := make(map[string]bool, len(idx))
	err := queryEach(ctx, q, l.bst.mark.get(len(idx)), args, func(scan func(...any) error) error {
		var id []byte
		if err := scan(&id); err != nil {
			return err
		}
		fresh[string(id)] = true
		return nil
	})
	if err != nil || len(fresh) == len(idx) {
		return taken, err
	}
	var rest []int
	for _, j := range idx {
		if !fresh[ids[j]] {
			rest = append(rest, j)
		}
	}
	expired, err := l.expiredEvents(ctx, q, consumer, ids, rest)
	for _, j := range rest {
		exp, ok := expired[ids[j]]
		taken[ids[j]] = sql.NullBool{Bool: exp, Valid: ok}
	}
	return taken, err
}

// expiredEvents returns, for the IDs idx that have a row, whether it
// expired.
func (l *Layer) expiredEvents(ctx context.Context, q querier, consumer string, ids []string, idx []int) (map[string]bool, error) {
	expired := make(map[string]bool, len(idx))
	err := queryEach(ctx, q, l.bst.marked.get(len(idx)), l.eventArgs(consumer, nil, ids, idx),
		func(scan func(...any) error) error {
			var (
				id  []byte
				exp bool
			)
			if err := scan(&id, &exp); err != nil {
				return err
			}
			expired[string(id)] = exp
			return nil
		})
	return expired, err
}

// eventArgs returns the arguments of a batched event statement: the
// consumer, the retention unless it is nil (the insert's), and the IDs idx:
// one array on Postgres, one JSON array in SQLite's insert, one argument
// each otherwise.
func (l *Layer) eventArgs(consumer string, retention any, ids []string, idx []int) []any {
	args := make([]any, 0, len(idx)+2)
	args = append(args, l.id(consumer))
	if retention != nil {
		args = append(args, retention)
	}
	if l.dialect == dialect.PG {
		a := make([]string, len(idx))
		for k, j := range idx {
			a[k] = ids[j]
		}
		return append(args, l.textArg(a))
	}
	if l.sqlite && retention != nil {
		// liteMarkMany's: the IDs as one JSON array of strings (valid
		// UTF-8 without NUL, as checkID found them, so that json_each
		// gives back each one as it was).
		a := make([]string, len(idx))
		for k, j := range idx {
			a[k] = ids[j]
		}
		list, _ := json.Marshal(a) // strings only: it cannot fail
		return append(args, string(list))
	}
	for _, j := range idx {
		args = append(args, l.id(ids[j]))
	}
	return args
}

// markManyMySQL: a plain multi-row INSERT, which commits to nothing when it
// fails (the statement rolls back, the transaction goes on). Only when it
// reports a duplicate key does one read find which IDs exist, expired rows
// are deleted, and the rest is inserted again; a duplicate that a
// concurrent transaction committed meanwhile makes that INSERT fail too,
// and then each remaining ID runs MarkProcessed's own statements.
func (l *Layer) markManyMySQL(ctx context.Context, q querier, consumer string, ids []string) ([]bool, error) {
	dup := make([]bool, len(ids))
	idx := make([]int, len(ids))
	for j := range ids {
		idx[j] = j
	}
	err := l.execEvents(ctx, q, consumer, ids, idx)
	if err == nil {
		return dup, nil
	}
	if classify(err, l.dialect) != kindUnique {
		return nil, err
	}
	expired, err := l.expiredEvents(ctx, q, consumer, ids, idx)
	if err != nil {
		return nil, err
	}
	var rest, revive []int
	for _, j := range idx {
		exp, found := expired[ids[j]]
		switch {
		case !found:
			rest = append(rest, j)
		case exp:
			revive = append(revive, j)
			rest = append(rest, j)
		default:
			dup[j] = true
		}
	}
	if len(revive) > 0 {
		if _, err := affected(ctx, q, l.bst.revive.get(len(revive)), l.eventArgs(consumer, nil, ids, revive)...); err != nil {
			return nil, err
		}
	}
	if len(rest) == 0 {
		return dup, nil
	}
	err = l.execEvents(ctx, q, consumer, ids, rest)
	if err == nil {
		return dup, nil
	}
	if classify(err, l.dialect) != kindUnique {
		return nil, err
	}
	for _, j := range rest {
		if dup[j], err = l.markProcessed(ctx, q, consumer, ids[j]); err != nil {
			return nil, err
		}
	}
	return dup, nil
}

// execEvents runs the plain multi-row INSERT of the IDs idx (MySQL).
func (l *Layer) execEvents(ctx context.Context, q querier, consumer string, ids []string, idx []int) error {
	_, err := q.exec(ctx, l.bst.mark.get(len(idx)), l.eventArgs(consumer, micros(l.eventTTL), ids, idx)...)
	return err
}
