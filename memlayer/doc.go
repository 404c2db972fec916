// Package memlayer is an in-memory idem.Layer with exactly the semantics of
// the Redis and SQL layers: random owner tokens, leases that lapse and are
// taken over, compare-and-set on the token, retention expiry.
//
// It is meant for users' unit tests and for single-process programs that
// need no durability. It knows nothing of other processes: it is never a
// guard across instances. Time is injectable with [WithClock], so tests
// advance a fake clock instead of sleeping.
//
// Expired records are invisible at once and are swept lazily during later
// calls; the layer starts no goroutine.
package memlayer
