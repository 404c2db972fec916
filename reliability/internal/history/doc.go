// Package history records what a run of idem's Store did under injected
// faults, and checks the record for broken promises.
//
// Tests written around the paths we thought of confirm those paths. This
// package is for the others: several Stores in separate processes share
// one Redis and one Postgres while a nemesis pauses, flushes, restarts and
// fails over Redis, kills Postgres backends and black-holes connections,
// stops an owner past its lease, skews application clocks and makes the
// work slow, panic or fail. Every call, every run of the work and every
// fault is recorded; after the faults clear and every lease lapses, the
// stores are read directly. Then Check proves, key by key, what users
// rely on: a payment is charged once, every retry gets the same answer,
// and a correct retry is never refused.
//
// The package imports nothing of idem: it is a pure checker of recorded
// data. The workload maps the Store's answers to outcomes.
//
// # The model
//
// A [Call] is one call of Do: its process (node), client key, fingerprint,
// invoke and return times, [Outcome], the value returned and the error's
// text, and — when this call's own fn ran — the [Execution] it ran.
// Outcomes: Executed (success, fn ran here), Replayed (success, not run
// here), Mismatch, InFlight, Unavailable, LeaseLost, FnFailed, Panicked,
// Closed, Canceled (the caller gave up), NotReplayable, OtherError,
// Rejected (refused before any claim: a request whose meaning the
// fingerprint cannot pin down), and Unknown when no return was recorded
// (the process was killed, or the history ended).
//
// An [Execution] is one run of fn: its process, its call, key and
// fingerprint, the owner token when known, start and end, whether it failed
// (an error or a panic: the key is released), its value bytes, when and why
// its work context was cancelled, and, when known, how its completion ended
// ([Completion]: accepted, refused, pending). A workload whose work ends in
// several ways names the way (Ending, which the summary counts) and marks a
// result that is its caller's only (Tombstone).
//
// A [Final] is a key's state read from SQL and from Redis at the end:
// absent, in progress, or completed with a fingerprint and result bytes;
// whether the record may have expired (retention) during the run; and,
// when the workload keeps a ledger, the executions whose side effect
// committed.
//
// A [Fault] is one injected fault: kind, the node it hit ("" for a shared
// service), start and end, and a detail. Anomalies list the faults that
// overlapped them. Two kinds mean something to the checks: [ProcessPause]
// (the node's process stopped from Start to End: it could not act, so its
// deadlines move) and [ProcessKill] (the node's process died at Start: its
// running work ended there).
//
// All times are Unix nanoseconds of the machine's real clock, which every
// process of a run shares; a skewed application clock never enters the
// record.
//
// # Recording
//
// A [Recorder] writes one process's events as JSON lines, each with one
// Write before the method returns, so a process killed at any moment loses
// at most the line it was writing; [Decode] drops such a last line and
// counts it. Give each process its own stream (a file or a pipe, not a
// buffered writer, and not one a restarted process appends to, which would
// put the cut line in the middle) and a node name of its own — a restarted
// process is a new node — then [Merge] the decoded streams with the
// nemesis's faults and the finals. The workload wraps each call:
//
//	p := rec.Invoke(clientKey, fp)
//	res, err := store.Do(ctx, key, fp, func(ctx context.Context) ([]byte, error) {
//		x := p.ExecStart("")
//		x.Watch(ctx, func(cause error) bool { return errors.Is(cause, idem.ErrLeaseLost) })
//		v, err := work(ctx, x.ID()) // a value that embeds x.ID(), the key and fp
//		x.End(v, err)               // a panic: End with an error, then re-panic
//		return v, err
//	})
//	p.Return(outcomeOf(res, err), res.Value, err)
//
// outcomeOf maps Do's answer, errors first (callers that shared a failed
// execution get Result.Replayed with the error): the caller's own context
// error is Canceled; *tiered.PanicError is Panicked; tiered.ErrNotReplayable
// NotReplayable; idem.ErrLeaseLost LeaseLost (also when fn's own error came
// of a lease-lost cancellation: the Store wraps it); idem.ErrMismatch,
// idem.ErrInFlight, idem.ErrUnavailable and idem.ErrClosed their names;
// the workload's own error FnFailed; anything else OtherError; no error,
// Replayed or Executed by Result.Replayed.
//
// A workload whose callers are in another process than the Store — a
// client of an HTTP service — records each request with InvokeOn in the
// client, naming the serving process as the call's node, and sends the
// call's ID with the request; the service's fn records its execution
// with ExecFor and that ID. Once the streams are merged, the workload
// marks the calls whose own execution ran (Executed, with Exec).
//
// Values should differ per execution (embed its ID): the checker never
// parses them, but it traces a replayed value to the execution that
// produced it by its bytes, and equal bytes from two executions blur that.
//
// # The checks
//
// Each check reports at most one [Anomaly] per key and [Kind], naming the
// calls and executions involved and the faults around them.
//
//  1. [DuplicateExecution]: at most one execution per key has its result
//     delivered to a caller (an Executed or Replayed call got its bytes) or
//     kept (its completion was accepted, or SQL holds its bytes at the end).
//     Two would be a payment charged twice, and two different answers.
//     A stream (Execution.Tombstone) whose owner's process was stopped
//     before its completion, which was not accepted, makes nothing
//     delivered: its bytes left before its tombstone, the documented limit
//     of a streamed response, which the middleware cannot hold back.
//  2. [CorruptResult]: every successful caller got exactly the bytes of the
//     result. Bytes that no execution produced — one byte changed, a
//     truncated body, a buffer overwritten after it was shared — mean a
//     client acts on an answer the service never gave. Final records are
//     checked the same way: a record no execution wrote would be replayed
//     to every later retry.
//  3. [ForeignResult]: every successful value is the value of a successful
//     execution of the same key and the same fingerprint. Another
//     fingerprint's result answers a different request (a payment of 900
//     told "paid 100"); another key's leaks another customer's data; a
//     failed execution's value was never a result at all.
//  4. [RefusedRetry]: a Mismatch needs another fingerprint on the key: one
//     that had used the key before the mismatch returned. And once the key
//     completed with a fingerprint, a call with that very fingerprint is a
//     retry and must be replayed, never refused: refused, the client cannot
//     learn that its payment went through.
//  5. [RerunAfterSuccess]: once the key is done — a caller was told
//     success, or the execution whose result was delivered returned, or
//     the one only kept was accepted — no execution starts again while the
//     record lives. The work may have had side effects even if this run
//     failed and no caller saw a second result.
//  6. [LostResult]: after the faults clear, SQL holds a completed record
//     with the fingerprint and exactly the bytes some caller was told; the
//     next retry would otherwise run the work again or get another answer.
//     [SplitRecord]: Redis may lose a record but must not hold a completed
//     result SQL does not (a replay from Redis would answer what SQL never
//     decided).
//  7. [LeftClaimed]: no record is left in progress once every lease lapsed.
//     A claim in Redis always has a TTL. A claim in SQL outlives its lease
//     when its owner died, or failed and could not reach SQL to release
//     it; only a retry takes it over, and until then the key answers
//     in-flight. The check excuses a key whose last call died with its
//     process (a kill); any other claim left fails it. So end a run with a
//     quiet round that calls every key once more, after the faults cleared
//     and the leases lapsed: each call takes a leftover claim over, and no
//     claim may remain.
//  8. [StaleOwner]: when another execution started while an earlier one
//     still ran (or before its completion was accepted), the earlier owner
//     lost the key and must be fenced: its completion refused, no caller
//     told success with its result, and its work context cancelled with a
//     lost-lease cause within Options.CancelGrace of the takeover —
//     counting only time its process was running, so a paused owner gets
//     its grace after it resumes. An execution whose process was paused
//     between its call and its start may have started on a claim that
//     lapsed meanwhile: when it starts after the key was done it must be
//     fenced itself, and when it overlaps another, one of the two must.
//     Users rely on the cancellation to stop a stale owner's side effects;
//     fencing keeps its result out.
//  9. [VanishedSuccess]: an execution that succeeded ends delivered,
//     kept, fenced (its completion refused, its work cancelled for a lost
//     lease) or killed with its process — or its completion is still
//     pending. One the Store never decided, after which the key ran
//     again, is a second side effect nobody guarded: a handler a framework
//     ran after the Store had answered and released the key.
//  10. [StaleReplay]: no caller is replayed a result whose record had
//     surely expired before it asked (its acceptance plus the key's
//     retention, Options.Retention, plus Options.ExpirySlack): a cache
//     that outlives its record lets two instances answer one key
//     differently once the key ran again.
//  11. [OverlongWait]: a call that ran no execution of its own (a replay,
//     a duplicate that waited for another owner, a refusal) returns within
//     Options.WaitBound, unless a fault that can slow a tier
//     (Options.Slowing) overlapped it: a duplicate obeys the Store's wait,
//     in the owner's process as on any other, whatever the owner does.
//  12. [Malformed]: the record itself must be sane, or every other verdict
//     is suspect: IDs unique, returns after invokes, every Executed call
//     naming an execution that exists in the same process for the same
//     key and fingerprint, executions starting after their call.
//  13. [ReplayedRelease]: an execution whose ending released the key (it
//     failed: a 5xx, a panic, a transaction that did not commit) or
//     finalised it as not replayable (Execution.Tombstone: a streamed
//     response) answers its own caller only. Another call that got its
//     bytes — a retry told the first attempt's 503 instead of running
//     again — was replayed what was never the key's result. Calls of the
//     same process made while it ran joined it there and are excused.
//  14. [DuplicateEffect], [StrayEffect]: when the workload records the
//     side effects that commit with the key's record (Final.Effects: a
//     ledger row written in the transaction that completes the key), at
//     most one execution per key committed one; none of them ended
//     uncommitted (a rollback, a reservation never completed); and SQL
//     holds the result of the one that did.
//
// A key whose Final says Expired may legitimately run again after its
// record expired: checks 1, 5, 6, 9 and 14 and the second half of 4 are
// skipped for it, and stale owners are judged by overlap only. Without any
// Final in the history, checks 6 and 7 are skipped; with some, every key
// needs one. Checks 10 and 11 run only when their options are set.
//
// Check runs in about linear time and memory in the size of the history:
// one sort by time, maps by ID and by value, and per key a sweep over its
// executions in start order.
package history
