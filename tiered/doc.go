// Package tiered is the Store users call: it puts the tiers of idem in front
// of a function so that the function runs once per key and every copy of the
// call gets the same answer, across any number of instances.
//
// A call to [Store.Do] goes through these steps:
//
//  1. Local burst: concurrent calls in this process with the same key and
//     fingerprint share one execution (singleflight). Each caller may give up
//     on its own context; that cancels neither the work nor the others.
//  2. Local cache: a bounded LRU of completed results answers hot replays
//     with no I/O. A different fingerprint is still a mismatch.
//  3. Redis (optional, [WithRedis]): one round trip claims the key or says
//     what is there — completed (replay), in progress (wait for its
//     completion signal), another fingerprint (mismatch).
//  4. SQL (recommended, [WithSQL]): a unique row decides. Completed: replay
//     and back-fill Redis. In progress: wait (bounded polling). Lease expired:
//     take over with a new token. While most calls need SQL (new keys), its
//     claim is sent together with Redis's rather than after it, so that a
//     first execution waits for the slower of the two, not for both; while
//     most are duplicates Redis answers, SQL is asked only when Redis leaves
//     the decision to it. The Store learns which holds from Redis's answers.
//  5. Work: only the owner runs fn, under a context detached from every
//     caller, renewed in every tier at lease/3, and cancelled with cause
//     [idem.ErrLeaseLost] if the lease cannot be kept.
//  6. Finish: success completes SQL first (the decision) and the local
//     cache; the caller is answered then, and Redis (which wakes waiters on
//     other instances) learns the result off the caller's time. A duplicate
//     that comes in between finds the key in progress in Redis and is
//     answered by SQL. [Store.Close] waits for these writes. An error or a
//     panic releases the key in every tier, so a retry runs again. A result
//     too large to keep completes the key with a marker that says so
//     (ErrNotReplayable): the work ran once and does not run again. A completion SQL cannot
//     take now is retried in the background while the token may be valid.
//
// Redis's word is final only for completed records. With SQL configured, a
// key Redis reports in progress goes to SQL, because a Redis claim whose
// reply was lost is an orphan its owner never releases; the wait for an
// owner SQL vouches for still uses Redis's completion signal. Leases are
// counted from when a claim or renewal was sent, less a margin, and each
// renewal is bounded by the lease it protects.
//
// # Modes
//
//   - SQL and Redis: recommended. Redis answers most duplicates in one round
//     trip; SQL makes the final decision and survives Redis loss.
//   - SQL only: correct; every duplicate costs a database read.
//   - Redis only: for dedup that is not about money. Weaker: Redis can lose a
//     lease on eviction, flush or failover, and a duplicate can then run.
//
// # Degraded modes
//
// A Redis call that fails or exceeds its timeout is skipped and SQL decides
// alone; after [DefaultRedisFailures] failures in a row Redis is skipped
// without trying for a cool-down, then probed again. Each switch is reported
// once to the Observer (EventFallbackOn, EventFallbackOff) and logged once
// through the Store's logger ([WithLogger], slog.Default by default); a
// probe that fails again switches nothing and logs nothing. When the deciding tier
// (SQL, or Redis in Redis-only mode) cannot answer, Do fails closed with
// [idem.ErrUnavailable] and fn does not run — unless [WithFailOpen] says to
// run it without a decision.
//
// # Panics
//
// A panic in fn is recovered inside the work (so singleflight cannot re-panic
// it on a goroutine no one can recover), the key is released in every tier,
// and every caller sharing that execution gets a *[PanicError] holding the
// value and the stack. The process never dies of it; the caller decides.
// The one exception is a panic after fn's own transaction committed its
// reservation (sqllayer's CompleteReservation): the work ran and its result
// is stored, so every caller gets that result with no error, and retries
// replay it.
//
// A call of runtime.Goexit in fn (t.FailNow in a test) ends the execution
// the same way, with [ErrGoexit] in place of the PanicError: renewal stops,
// the key is released (or what fn's transaction committed is kept), and
// every caller waiting for it hears. The goroutine that ran fn still exits;
// when that is the caller's own (a ctx that cannot be cancelled), its Do
// does not return.
package tiered
