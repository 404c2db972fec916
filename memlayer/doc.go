// Package memlayer is an in-memory idem.Layer with exactly the semantics of
// the Redis and SQL layers: random owner tokens, leases that lapse, a grace
// of lease/4 for the owner when a Reserve first finds its lease lapsed and a
// takeover after it, compare-and-set on the token, retention expiry. Every
// record it returns carries ExpiresIn by its clock.
//
// It is meant for users' unit tests and for single-process programs that
// need no durability. It knows nothing of other processes: it is never a
// guard across instances. Time is injectable with [WithClock], so tests
// advance a fake clock instead of sleeping.
//
// Expired records are invisible at once and are swept lazily during later
// calls; the layer starts no goroutine.
package memlayer
