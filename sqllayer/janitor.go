package sqllayer

import (
	"context"
	"fmt"
)

// DeleteExpired deletes expired idempotency records and processed-event rows,
// in batches of at most batch rows (each its own short statement, so no lock
// is held long), until a batch deletes fewer than batch. It returns how many
// rows it deleted. batch must be positive (500, janitor.DefaultBatch, suits
// most tables); 0 or less is an error, and nothing is deleted. Sync versions
// never expire.
//
// Expiry is the database's clock, as everywhere: Reserve and Get never
// return an expired record as live, so the janitor only reclaims space. An
// in-progress record is deleted only once its lease and the grace after it
// have ended too, whatever its expiry says (a record written by a version
// that let the expiry end with the lease): the grace is a quarter of the
// lease, which is not stored but never exceeds lease_until - created_at
// (the claim came at created_at, its renewals and grace later), so the
// sweep waits until lease_until + (lease_until - created_at)/4, never
// before the grace's end. A completed record goes at its expiry.
func (l *Layer) DeleteExpired(ctx context.Context, batch int) (n int64, err error) {
	if batch <= 0 {
		return 0, fmt.Errorf("sqllayer: DeleteExpired: batch %d must be positive", batch)
	}
	for _, stmt := range l.st.sweep {
		for {
			deleted, err := l.sweepOnce(ctx, stmt, batch)
			if err != nil {
				return n, err
			}
			n += deleted
			if deleted < int64(batch) {
				break
			}
		}
	}
	return n, nil
}

// sweepOnce runs one sweep statement, deleting at most batch rows.
func (l *Layer) sweepOnce(ctx context.Context, stmt string, batch int) (deleted int64, err error) {
	err = l.retry(ctx, func() (err error) {
		deleted, err = affected(ctx, l.pool(), stmt, int64(batch))
		return err
	})
	if err != nil {
		return 0, l.wrap("delete expired", err)
	}
	return deleted, nil
}

// DeleteExpiredBatch runs one batch of DeleteExpired: each of its
// statements once (expired records, then processed-event rows), each
// deleting at most batch rows, and returns how many rows they deleted
// together. Fewer than batch means that no expired row is left (of those
// it could lock). A caller that paces a sweep (the janitor) calls it in a
// loop, pausing between calls; batch must be positive.
func (l *Layer) DeleteExpiredBatch(ctx context.Context, batch int) (n int64, err error) {
	if batch <= 0 {
		return 0, fmt.Errorf("sqllayer: DeleteExpiredBatch: batch %d must be positive", batch)
	}
	for _, stmt := range l.st.sweep {
		deleted, err := l.sweepOnce(ctx, stmt, batch)
		if err != nil {
			return n, err
		}
		n += deleted
	}
	return n, nil
}
