// Package reliability holds no code of its own: its tests prove, under real
// faults, the one promise users judge idem by — a duplicate never slips
// through and a correct retry is never refused.
//
// Each scenario runs several [github.com/idemkit/idem/tiered.Store]
// instances over one Redis and one database (a real Redis and Postgres, a
// test-owned redis-server where the scenario kills, pauses or flushes
// Redis, and miniredis with SQLite where the fault can be produced there)
// and breaks something while the guarded function runs or while duplicates
// wait:
//
//   - Redis killed, paused past its timeout, flushed, or a lease key
//     deleted; a Redis write applied whose reply was lost, leaving an
//     orphan claim its owner never releases; a Redis claim by a request
//     SQL is about to refuse;
//   - a Postgres backend terminated during a claim, a completion and its
//     commit; a reply lost after the commit;
//   - an owner stalled past its lease, a renewal stuck past it, an owner
//     that crashed after its claim, a caller that gave up;
//   - malformed, oversized and broken HTTP requests, and tenants sharing a
//     client key.
//
// Every scenario counts the executions of the guarded function per key and
// reads the stored records in SQL and Redis directly. What each one
// asserts:
//
//   - the function runs at most once per key while its record lives (a key
//     whose work failed may run again, and does);
//   - every caller gets the stored bytes, or idem.ErrInFlight,
//     idem.ErrUnavailable or idem.ErrLeaseLost — never another run's bytes,
//     never another tenant's;
//   - nothing is lost: a result that was returned as a success is in SQL;
//   - nothing is stuck: once a lease lapses by the database's clock, a
//     retry gets the result or runs once; every Redis key has a TTL.
//
// A property test (pgregory.net/rapid) runs random interleavings of calls —
// new keys, duplicates, mismatches, Once, failing and panicking functions,
// cancelled callers — on three Stores with random faults between steps, and
// checks the same invariants against a model after every step.
//
// The soak test (build tag soak, make soak) runs mixed load for
// IDEM_SOAK_TIME over three Stores while a test-owned redis-server restarts
// and Postgres backends are terminated, then checks for zero double runs,
// zero lost completions, and goroutines and database connections back to
// their baseline.
//
// Scenarios that found a weakness in another package stay here as
// regression tests; their comments say what used to go wrong.
package reliability
