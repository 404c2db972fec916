// Package storetest is the conformance suite that every idem.Layer passes:
// the in-memory layer, Redis (plain and Cluster) and SQL (Postgres, MariaDB,
// SQLite). A layer is correct when [Run] passes against it under -race.
//
// Beside claims, replays, fencing by token and retention, the suite pins
// the two promises the tiers above rely on for timing: every record a
// layer returns carries ExpiresIn, never more than the record has left by
// the store's clock and running down with it; and a lapsed lease is first
// given a grace of a quarter of the lease (the owner's token still works,
// concurrent Reserves grant it once), and only a Reserve after the grace
// takes it over. That grace holds whatever the retention: a claim's record
// outlives its lease and grace however long the work runs, and a store's
// sweep of expired records never deletes it first.
//
// The suite works against slow, out-of-process stores: it uses short real
// leases (a few hundred milliseconds) and no long sleeps, and a store with an
// injectable clock skips the sleeps altogether through [Harness.Advance].
// Every subtest uses fresh random keys, so several packages may run the suite
// against one shared server at once.
package storetest
