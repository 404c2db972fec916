// Package storetest is the conformance suite that every idem.Layer passes:
// the in-memory layer, Redis (plain and Cluster) and SQL (Postgres, MariaDB,
// SQLite). A layer is correct when [Run] passes against it under -race.
//
// The suite works against slow, out-of-process stores: it uses short real
// leases (a few hundred milliseconds) and no long sleeps, and a store with an
// injectable clock skips the sleeps altogether through [Harness.Advance].
// Every subtest uses fresh random keys, so several packages may run the suite
// against one shared server at once.
package storetest
