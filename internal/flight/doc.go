// Package flight is a table of the executions in flight in a process,
// which concurrent callers of one key share: singleflight, with two
// differences that matter to a store of idempotent calls.
//
// A caller knows at once, from [Table.Join], whether it leads the
// execution or joins one. A caller that joins waits on [Call.Done] under
// its own rules (a deadline, its own context) rather than inside the
// table, and a leader may wait for its own execution on another goroutine
// ([Call.Watch]), so that it can give up without cutting the work short.
// And the work of every execution can be cancelled at once
// ([Table.SetCancel], [Table.CancelAll]), for a store that closes.
//
// An execution is a [Call] embedded in the caller's own type, so that
// joining costs no allocation of its own. The table is split into [Shards]
// independently locked shards by the key's hash, each on cache lines of
// its own, so that unrelated keys neither queue on one lock nor pass one
// cache line between cores.
package flight
