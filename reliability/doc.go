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
// The soak (TestSoak; make soak runs it for SOAKTIME, make test for a
// short seed) runs the test binary again as three service processes, each
// serving a payments API behind idem's middleware on Gin, Echo or chi,
// over one Postgres behind a fault proxy and one Redis under Sentinel. A
// client in the test drives them over real HTTP — new operations, retries,
// bursts of duplicates across and within processes, mismatches, bodies a
// Go handler reads differently from their fingerprint, keys outliving a
// short retention — while a nemesis pauses, flushes, restarts and fails
// over Redis, kills Postgres backends and black-holes their connections,
// stops an owner past its lease, skews an application clock and slows
// completions, and handlers are slow, fail and panic on request. Every
// run of a handler also draws how it ends, by the seed, from the table of
// the ways user code behind the middleware ends: a response kept (2xx,
// 4xx), nothing written, a status that releases the key, a panic before
// or after writing, headers changed after WriteHeader, a streamed
// response, work longer than the lease, runtime.Goexit, and the
// reservation completed in the handler's own transaction beside a ledger
// row — committed, completed twice, rolled back before or after
// completing, or taken and never completed (IDEM_SOAK_ENDINGS=all, or a
// list of names, adds the rows the library does not meet yet). Every
// request with the status, replayed headers and body its caller got,
// every run of a handler with the answer it meant and how it ended, the
// ledger's committed rows and every fault are recorded
// (internal/history); once the faults are lifted, every lease has
// lapsed and a quiet round has called every key once more, the stores are
// read directly and the history is checked. Any anomaly fails the test, as
// does a service process that leaves a goroutine behind or, under the race
// detector, reports a race. IDEM_SOAK_SEED picks the seed; IDEM_SOAK_KEEP
// names a directory to keep the history of a failed run in; to tell one
// fault's trouble from another's, IDEM_SOAK_FAULTS lists the only kinds to
// inject and IDEM_SOAK_NEMESIS=off injects none (the run then fails on the
// missing kinds, but checks the history all the same).
//
// TestGalera (make infra-galera runs its long form) starts a three-node
// MariaDB Galera cluster of its own with infra/galera.sh, every node
// taking writes, and runs idem on it: Stores on two nodes claiming one
// key at once (a certification conflict is a lost race), a duplicate on
// another node right after the owner's commit under each wsrep_sync_wait,
// and a soak over Stores on all three nodes while a nemesis kills a node
// (SIGKILL) and restarts it, in the standard and the atomic mode, judged
// by the same history checker.
//
// TestSoakFailover (make infra-pg runs it long) runs the same soak on a
// pg_auto_failover formation that infra/pgaf.sh starts — a monitor and two
// Postgres nodes, reached through a multi-host DSN — while the nemesis
// switches the primary over, kills its node and crashes its Postgres:
// with a synchronous standby any anomaly fails it; with an asynchronous
// one it counts what the lost commits broke.
//
// Scenarios that found a weakness in another package stay here as
// regression tests; their comments say what used to go wrong.
package reliability
