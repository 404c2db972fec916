// Package mix estimates a layer's workload: the share of Reserve calls that
// found their key already there. The SQL and Redis layers use it to choose
// the order of their Reserve commands, so that a workload of duplicates and
// a workload of new keys each pay one round trip for their common case.
package mix
