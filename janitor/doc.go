// Package janitor deletes expired idempotency records on a schedule, one
// instance at a time.
//
// Expired records are never treated as live (every layer compares expiry
// with the store's clock), so sweeping them only reclaims space. A Sweeper
// never deletes an in-progress claim before its lease and the grace after
// it have ended, whatever its expiry says: a claim its owner may still
// complete is not an expired record (sqllayer's DeleteExpired). On a
// busy table every instance sweeping at once would only contend for the
// same rows. A Janitor takes a plain mutual exclusion first — a
// bsm/redislock lock in Redis, obtained with a TTL, refreshed while the
// sweep runs, released after — so that one instance of N sweeps at a time,
// and a sweeper that crashed holds the lock no longer than its TTL:
//
//	j, err := janitor.New(sqlLayer, janitor.WithLock(rdb))
//	go j.Run(ctx) // or tiered.WithJanitor(j): the Store runs it and stops it on Close
//
// Each sweep deletes in statements of at most the batch size (default
// 500), so no statement holds locks long. A sweep of a BatchSweeper (a
// *sqllayer.Layer) is paced by what it costs the database: each statement
// is sized to run about WithStatementTime (10 ms) from the cost of a row
// the statements before it measured, and the sweep pauses after each so
// that statements run WithDutyCycle's share (a fifth) of its time, at most
// WithRate rows a second when that is set. When Redis cannot be reached the
// janitor does not wait for it: it sweeps without the lock, in small
// batches (at most 50 rows a statement), which is safe because each DELETE
// of expired rows is idempotent — at worst two instances contend for a few
// rows. Without WithLock every instance sweeps on its own schedule.
//
// Each sweep is reported to the observer of the context the Janitor runs
// under as idem.EventSwept with the number of rows deleted; a failed one as
// idem.EventTierError. A Store that runs the Janitor (tiered.WithJanitor)
// hands it the Store's observer so; without a Store, run it under
// idem.ContextWithObserver(ctx, o). idemprom counts both.
package janitor
