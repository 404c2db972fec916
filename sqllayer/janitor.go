package sqllayer

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// DefaultSweepBatch is a batch size for DeleteExpired and RunJanitor that
// keeps each DELETE short.
const DefaultSweepBatch = 500

// DeleteExpired deletes expired idempotency records and processed-event rows,
// in batches of at most batch rows (each its own short statement, so no lock
// is held long), until a batch deletes fewer than batch. It returns how many
// rows it deleted. batch must be positive (DefaultSweepBatch suits most
// tables); 0 or less is an error, and nothing is deleted. Sync versions
// never expire.
//
// Expiry is the database's clock, as everywhere: Reserve and Get never
// return an expired record as live, so the janitor only reclaims space.
func (l *Layer) DeleteExpired(ctx context.Context, batch int) (n int64, err error) {
	if batch <= 0 {
		return 0, fmt.Errorf("sqllayer: DeleteExpired: batch %d must be positive", batch)
	}
	for _, stmt := range l.st.sweep {
		for {
			var deleted int64
			err := l.retry(ctx, func() (err error) {
				deleted, err = affected(ctx, l.pool(), stmt, int64(batch))
				return err
			})
			if err != nil {
				return n, l.wrap("delete expired", err)
			}
			n += deleted
			if deleted < int64(batch) {
				break
			}
		}
	}
	return n, nil
}

// RunJanitor runs DeleteExpired(ctx, batch) at once and then every interval
// until ctx ends, and returns nil then. every and batch must be positive:
// otherwise it returns an error at once. It starts no goroutine: run it in one
// of yours and cancel ctx to stop it. A failed sweep is reported to the
// Observer as EventTierError and tried again at the next tick.
func (l *Layer) RunJanitor(ctx context.Context, every time.Duration, batch int) error {
	if every <= 0 {
		return fmt.Errorf("sqllayer: RunJanitor: interval %v must be positive", every)
	}
	if batch <= 0 {
		return fmt.Errorf("sqllayer: RunJanitor: batch %d must be positive", batch)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		start := l.now()
		if _, err := l.DeleteExpired(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.observe(ctx, idem.Event{Kind: idem.EventTierError, Duration: l.now().Sub(start), Err: err})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
