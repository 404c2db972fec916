// Package breaker is a circuit breaker: it tells whether a dependency that
// keeps failing is worth asking.
//
// After a number of failures in a row the dependency is switched off for a
// cool-down; then one call at a time probes it, and the first success
// switches it back on. The breaker only counts and decides: what a switch
// means (an event, a log line, another path taken) is its owner's, told by
// the results of [Breaker.Success] and [Breaker.Failure].
//
// A healthy dependency costs an atomic load per call: no lock and no write
// to shared memory, so that calls on every core do not pass a cache line
// between them.
package breaker
