package history

import "fmt"

// Outcome is how one call of Do ended, as the caller saw it. The recorder
// maps the Store's answer to it; the checker never sees an error value.
type Outcome uint8

// The outcomes. Only Executed and Replayed are successes.
const (
	// Unknown: no return was recorded. The caller's process was killed, or
	// the history ended first.
	Unknown Outcome = iota
	// Executed: Do succeeded and this call's own fn ran (Result.Replayed
	// false).
	Executed
	// Replayed: Do succeeded without running this call's fn: a stored
	// result, or another caller's execution shared in this process.
	Replayed
	// Mismatch: idem.ErrMismatch, the key is bound to another fingerprint.
	Mismatch
	// InFlight: idem.ErrInFlight, another owner still worked after the wait.
	InFlight
	// Unavailable: idem.ErrUnavailable, no tier could decide; fn did not run.
	Unavailable
	// LeaseLost: idem.ErrLeaseLost, fn ran (or was about to) but the claim
	// was lost; its result was not kept.
	LeaseLost
	// FnFailed: fn returned an error; the key was released.
	FnFailed
	// Panicked: fn panicked (*tiered.PanicError); the key was released.
	Panicked
	// Closed: the Store was closed (idem.ErrClosed).
	Closed
	// Canceled: the caller's context ended before the answer came.
	Canceled
	// NotReplayable: tiered.ErrNotReplayable, the work ran once but its
	// result was too large to keep; the key is decided for good. The owner
	// gets fn's value with it, later callers nothing.
	NotReplayable
	// OtherError: an error the recorder could not classify.
	OtherError
	// Rejected: the request was refused before any claim because the
	// fingerprint cannot tell what it means (an HTTP 400 for a body that
	// two readers would read differently, say); fn did not run. Unlike a
	// Mismatch it says nothing of the key.
	Rejected
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"unknown", "executed", "replayed", "mismatch", "in-flight", "unavailable",
	"lease-lost", "fn-failed", "panicked", "closed", "canceled", "not-replayable", "other-error",
	"rejected",
}

// String returns the outcome's name as it appears in the JSON lines.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Succeeded reports whether the caller was told the work is done and given
// its result: Executed or Replayed.
func (o Outcome) Succeeded() bool { return o == Executed || o == Replayed }

// MarshalText implements encoding.TextMarshaler.
func (o Outcome) MarshalText() ([]byte, error) {
	if o >= numOutcomes {
		return nil, fmt.Errorf("history: no outcome %d", uint8(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("history: unknown outcome %q", b)
}

// Completion is how an execution's completion ended: whether the deciding
// tier kept its result. The recorder knows it only when the Store tells
// (an observer); most executions leave it CompletionUnknown.
type Completion uint8

// The completions.
const (
	// CompletionUnknown: not recorded.
	CompletionUnknown Completion = iota
	// CompletionAccepted: the deciding tier stored the result under the owner's token.
	CompletionAccepted
	// CompletionRefused: the token no longer owned the key (idem.ErrLeaseLost).
	CompletionRefused
	// CompletionPending: still being retried in the background when the
	// history ended.
	CompletionPending
	numCompletions
)

var completionNames = [numCompletions]string{"unknown", "accepted", "refused", "pending"}

// String returns the completion's name.
func (c Completion) String() string {
	if c < numCompletions {
		return completionNames[c]
	}
	return fmt.Sprintf("completion(%d)", uint8(c))
}

// MarshalText implements encoding.TextMarshaler.
func (c Completion) MarshalText() ([]byte, error) {
	if c >= numCompletions {
		return nil, fmt.Errorf("history: no completion %d", uint8(c))
	}
	return []byte(completionNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Completion) UnmarshalText(b []byte) error {
	for i, n := range completionNames {
		if n == string(b) {
			*c = Completion(i)
			return nil
		}
	}
	return fmt.Errorf("history: unknown completion %q", b)
}

// Call is one call of Do, from invoke to return. Times are Unix nanoseconds
// of the machine's real clock (every process of a run shares it), never of a
// clock a fault skews.
type Call struct {
	// ID is unique in the history (the recorder prefixes it with the node).
	ID string
	// Node is the process the call ran in.
	Node string
	// Key is the client key and Fingerprint the request's fingerprint. A
	// workload that uses scopes writes the scope into Key too: the same
	// client key in two scopes is two keys to idem, and must be to the
	// checker.
	Key, Fingerprint string
	// Invoke is when Do was called; Return when it returned (0: Unknown).
	Invoke, Return int64
	// Outcome is how the call ended.
	Outcome Outcome
	// Value is Result.Value as returned, byte for byte (fn's value also
	// comes with FnFailed, LeaseLost and the owner's NotReplayable).
	Value []byte
	// Err is the error's text, "" on success.
	Err string
	// Exec is the ID of the execution this call's own fn ran, when it had
	// started by the return; required for Executed.
	Exec string
}

// Execution is one run of fn: what the work did, whoever's call it served.
type Execution struct {
	// ID is unique in the history.
	ID string
	// Node is the process fn ran in; Call the call whose fn it is.
	Node, Call string
	// Key and Fingerprint are the call's.
	Key, Fingerprint string
	// Token is the owner token, "" when unknown.
	Token string
	// Start is when fn began; End when it returned (0: never seen: the
	// process was killed, or the history ended first).
	Start, End int64
	// Failed is true when fn returned an error or panicked: the key is
	// released and the value is nobody's result.
	Failed bool
	// Value is what fn returned, byte for byte; Err its error's text.
	Value []byte
	Err   string
	// Canceled is when the work's context was cancelled (0: not while fn
	// ran), Cause the cause's text, and LeaseLost whether the cause was
	// idem.ErrLeaseLost (the recorder classifies it).
	Canceled  int64
	Cause     string
	LeaseLost bool
	// Completion is how its completion ended, when known, and Completed
	// when (0: unknown).
	Completion Completion
	Completed  int64
	// Ending names how fn ended, in the workload's words (a response
	// kept, none written, a 5xx, a panic, a rolled-back transaction …);
	// Summary counts the executions per ending. "" when not recorded.
	Ending string
	// Tombstone is true when fn's result is its own caller's only: the
	// key is decided for good, but the result is never replayed (a
	// streamed response). With Failed, it makes an ending whose bytes no
	// other caller may get (check 13).
	Tombstone bool
}

// StoredState is the state of a key's record in one store, read at the end.
type StoredState uint8

// The stored states.
const (
	// NotRead: this store was not read (or is not part of the run).
	NotRead StoredState = iota
	// Absent: no record.
	Absent
	// InProgress: a claim.
	InProgress
	// Completed: a result.
	Completed
	numStoredStates
)

var storedNames = [numStoredStates]string{"not-read", "absent", "in-progress", "completed"}

// String returns the state's name.
func (s StoredState) String() string {
	if s < numStoredStates {
		return storedNames[s]
	}
	return fmt.Sprintf("stored(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s StoredState) MarshalText() ([]byte, error) {
	if s >= numStoredStates {
		return nil, fmt.Errorf("history: no stored state %d", uint8(s))
	}
	return []byte(storedNames[s]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *StoredState) UnmarshalText(b []byte) error {
	for i, n := range storedNames {
		if n == string(b) {
			*s = StoredState(i)
			return nil
		}
	}
	return fmt.Errorf("history: unknown stored state %q", b)
}

// Stored is a key's record in one store as read at the end.
type Stored struct {
	State       StoredState
	Fingerprint string // InProgress and Completed
	Value       []byte // Completed
}

// Final is a key's state read directly from the stores after the faults
// cleared and every lease lapsed.
type Final struct {
	Key string
	// SQL decides; Redis is a cache that may have lost the record.
	SQL, Redis Stored
	// Expired says the record may have expired by retention during the
	// run: the work may then legitimately have run again, and the record
	// may be gone.
	Expired bool
	// At is when the stores were read.
	At int64
	// Effects are the IDs of the executions whose side effect committed
	// (a ledger row written in the transaction that completed the key),
	// as read from the database at the end; nil when the workload keeps
	// no such record. Check 14 holds them against the record.
	Effects []string
}

// FaultKind names a fault. Any name is allowed; the checker understands
// ProcessPause and ProcessKill (which need Fault.Node) and counts the rest.
type FaultKind string

// Fault kinds a nemesis of idem injects.
const (
	RedisPause        FaultKind = "redis-pause"        // Redis stopped (SIGSTOP)
	RedisFlush        FaultKind = "redis-flush"        // FLUSHALL
	RedisRestart      FaultKind = "redis-restart"      // restarted, data lost or not
	SentinelFailover  FaultKind = "sentinel-failover"  // a replica promoted
	PostgresKill      FaultKind = "postgres-kill"      // backends terminated
	PostgresBlackhole FaultKind = "postgres-blackhole" // connections silently dropped
	ProcessPause      FaultKind = "process-pause"      // a node stopped (SIGSTOP) until End
	ProcessKill       FaultKind = "process-kill"       // a node killed (SIGKILL) at Start
	ClockSkew         FaultKind = "clock-skew"         // a node's app clock skewed
	SlowWork          FaultKind = "slow-work"          // fn made slow
	WorkPanic         FaultKind = "work-panic"         // fn made to panic
	WorkError         FaultKind = "work-error"         // fn made to fail (a 5xx)
	SlowCompletion    FaultKind = "slow-completion"    // the deciding tier slow to take completions
	// ClusterMasterKill: a Redis Cluster master killed (SIGKILL) until its
	// replica was elected and it rejoined, empty, as a replica.
	ClusterMasterKill FaultKind = "cluster-master-kill"
	// ClusterFailover: CLUSTER FAILOVER forced on a replica until it was
	// master and its former master its replica.
	ClusterFailover FaultKind = "cluster-failover"
)

// Fault is one injected fault.
type Fault struct {
	ID   string
	Kind FaultKind
	// Node is the process it hit, "" for a shared service.
	Node string
	// Start and End bound it: record Start before injecting the fault and
	// End after lifting it, so that the span covers it. End 0: it lasted
	// to the end of the history (for ProcessKill, Start is the kill).
	Start, End int64
	Detail     string
}

// Problem is something in the history that cannot be right whatever the
// store did: an ID used twice, parts of one record that disagree, a line
// that says nothing. Check reports each as a malformed-history anomaly.
type Problem struct {
	ID, Key, Detail string
}

// History is everything recorded in one run: the calls, the executions,
// the faults and the final states, merged from every process.
type History struct {
	Calls  []Call
	Execs  []Execution
	Faults []Fault
	Finals []Final
	// Problems found while the events were merged.
	Problems []Problem
	// Events counts the events (lines) that made the history; Truncated
	// the unreadable last lines that were dropped (a killed writer).
	Events, Truncated int
}

// span returns the first and last time the history mentions.
func (h *History) span() (first, last int64) {
	see := func(ts ...int64) {
		for _, t := range ts {
			if t <= 0 {
				continue
			}
			if first == 0 || t < first {
				first = t
			}
			if t > last {
				last = t
			}
		}
	}
	for i := range h.Calls {
		c := &h.Calls[i]
		see(c.Invoke, c.Return)
	}
	for i := range h.Execs {
		e := &h.Execs[i]
		see(e.Start, e.End, e.Canceled, e.Completed)
	}
	for i := range h.Faults {
		see(h.Faults[i].Start, h.Faults[i].End)
	}
	for i := range h.Finals {
		see(h.Finals[i].At)
	}
	return first, last
}
