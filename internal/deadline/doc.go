// Package deadline gives calls bounded by one timeout their deadline
// without a timer per call.
//
// A [Bound] cuts time into slots of a sixteenth of its timeout. Calls that
// start within one slot, on a context that can neither be cancelled nor run
// out ([Detached]), share one timer context whose deadline is the slot's
// start plus the timeout: each gets at most its timeout and at least
// fifteen sixteenths of it. A context of the caller's that can end keeps
// its own cancellation and gets a timer of its own, as
// context.WithDeadline gives it.
//
// context.WithTimeout per call costs a timer start and stop and four
// allocations; for a store whose replays make one short call each, that
// was a tenth of its own work. A shared slot costs an atomic load, and
// nothing at all when the caller lends the storage of the returned context
// ([Bound.ContextIn]).
package deadline
