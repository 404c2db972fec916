package history

import (
	"fmt"
	"strings"
	"time"
)

// Kind names an anomaly: which promise a history breaks.
type Kind string

// The anomaly kinds, one or two per check, in the order of doc.go.
const (
	// DuplicateExecution (check 1): more than one execution of a key had
	// its result received by a caller or kept by a store.
	DuplicateExecution Kind = "duplicate-execution"
	// CorruptResult (check 2): a successful caller, or a final record, got
	// bytes that no execution produced.
	CorruptResult Kind = "corrupt-result"
	// ForeignResult (check 3): a successful caller, or a final record, got
	// the bytes of another key's execution, of another fingerprint's, or of
	// an execution that failed.
	ForeignResult Kind = "foreign-result"
	// RefusedRetry (check 4): a call was refused as a mismatch although the
	// key was bound to its own fingerprint, or to none.
	RefusedRetry Kind = "refused-retry"
	// RerunAfterSuccess (check 5): fn started again on a key that was
	// already done.
	RerunAfterSuccess Kind = "rerun-after-success"
	// LostResult (check 6): a result some caller was told about is not what
	// SQL holds after the faults cleared.
	LostResult Kind = "lost-result"
	// SplitRecord (check 6): Redis holds a completed result SQL does not.
	SplitRecord Kind = "split-record"
	// LeftClaimed (check 7): a key is still claimed after every lease
	// lapsed.
	LeftClaimed Kind = "left-claimed"
	// StaleOwner (check 8): an owner that lost its key to another was not
	// fenced off: its work was not cancelled, its completion was accepted,
	// or its caller was told success.
	StaleOwner Kind = "stale-owner"
	// VanishedSuccess (check 9): an execution succeeded, yet its result was
	// neither delivered, kept nor refused, and the key ran again: work
	// that ran unguarded, or whose result the Store dropped.
	VanishedSuccess Kind = "vanished-success"
	// StaleReplay (check 10): a caller was replayed a result whose record
	// had surely expired before it asked.
	StaleReplay Kind = "stale-replay"
	// OverlongWait (check 11): a caller that ran no execution of its own
	// (it waited for another owner, say) waited past the bound, with no
	// fault to slow it.
	OverlongWait Kind = "overlong-wait"
	// Malformed (check 12): the history itself cannot be right.
	Malformed Kind = "malformed-history"
	// ReplayedRelease (check 13): a caller got the answer of an execution
	// whose ending released the key (or finalised it as not replayable)
	// though that execution was not its own.
	ReplayedRelease Kind = "replayed-release"
	// DuplicateEffect (check 14): more than one execution of a key
	// committed its side effect.
	DuplicateEffect Kind = "duplicate-effect"
	// StrayEffect (check 14): a side effect committed by an execution that
	// ended uncommitted, or one whose result the key's record does not
	// hold.
	StrayEffect Kind = "stray-effect"
)

// Kinds lists every kind in the order of the checks.
var Kinds = []Kind{
	DuplicateExecution, CorruptResult, ForeignResult, RefusedRetry, RerunAfterSuccess,
	LostResult, SplitRecord, LeftClaimed, StaleOwner, VanishedSuccess, StaleReplay,
	OverlongWait, Malformed, ReplayedRelease, DuplicateEffect, StrayEffect,
}

// Anomaly is one broken promise on one key: every instance of one kind on
// the key, with the calls and executions involved and the faults that
// overlapped them in time.
type Anomaly struct {
	Kind Kind
	// Key is the client key, "" for a problem of the whole history.
	Key string
	// Detail says what happened, in words, for up to a few instances.
	Detail string
	// Calls and Execs are the IDs involved.
	Calls, Execs []string
	// From and To bound the calls and executions involved.
	From, To int64
	// Faults are those that overlapped [From, To].
	Faults []Fault
}

// String renders the anomaly on a few lines, for a log.
func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s key=%q: %s", a.Kind, a.Key, a.Detail)
	if len(a.Calls) > 0 {
		fmt.Fprintf(&b, "\n  calls: %s", strings.Join(a.Calls, " "))
	}
	if len(a.Execs) > 0 {
		fmt.Fprintf(&b, "\n  executions: %s", strings.Join(a.Execs, " "))
	}
	if len(a.Faults) > 0 {
		b.WriteString("\n  faults around it:")
		for i, f := range a.Faults {
			if i == maxFaultsShown {
				fmt.Fprintf(&b, " (and %d more)", len(a.Faults)-i)
				break
			}
			fmt.Fprintf(&b, " %s", f.Kind)
			if f.Node != "" {
				fmt.Fprintf(&b, "@%s", f.Node)
			}
			fmt.Fprintf(&b, "[%s]", f.ID)
		}
	}
	return b.String()
}

const maxFaultsShown = 8

// Options tune the checks. The zero value is ready to use.
type Options struct {
	// CancelGrace is how long a stale owner's work may run on after the
	// key was taken over (or after its process resumed, when the nemesis
	// had paused it) before its context must have been cancelled with a
	// lost lease. Default 1 s. The Store notices a lost lease at its next
	// renewal: at once after a resume when the renewal timer was armed
	// before the pause, but up to a third of the lease later when the
	// pause fell between the claim and the arming. A grace under lease/3
	// plus the deciding tier's timeout reports that window too.
	CancelGrace time.Duration
	// WaitBound bounds how long a call that ran no execution of its own
	// may take (check 11): a replay, a duplicate that waited for another
	// owner, a refusal must return within WaitBound of its invoke, unless
	// a fault that can slow a tier (see Slowing) overlapped it. Set it to
	// the Store's wait plus what its tiers may take on the way (a Redis and
	// a SQL call before the wait, one of each after it, at their timeouts)
	// plus slack for the machine. Zero turns the check off.
	WaitBound time.Duration
	// Slowing lists the fault kinds that may slow a waiting call past
	// WaitBound: a fault of one of them on the call's node, or on a shared
	// service (Node ""), excuses a call it overlapped. Nil means
	// DefaultSlowing.
	Slowing []FaultKind
	// Retention returns how long a completed record of key lives (the
	// Store's retention for the route the key belongs to), or 0 when
	// unknown. Check 10 judges replays against it; nil turns it off.
	Retention func(key string) time.Duration
	// ExpirySlack is added to a record's latest expiry before a replay is
	// called stale (check 10). Default 1 s.
	ExpirySlack time.Duration
}

// DefaultSlowing are the fault kinds that may slow a waiting call unless
// Options.Slowing says otherwise: a Redis stopped, restarted or failing
// over, Postgres backends killed or connections black-holed, and the
// call's own process stopped. Slow work, a skewed clock, a failing or
// panicking fn and slow completions do not: a duplicate's wait is bounded
// whatever the owner does.
var DefaultSlowing = []FaultKind{RedisPause, RedisRestart, SentinelFailover, PostgresKill, PostgresBlackhole, ProcessPause}

// Report is what Check found.
type Report struct {
	// Anomalies, by key and then by the order of Kinds.
	Anomalies []Anomaly
	Summary   Summary
}

// OK reports whether the history broke no promise.
func (r *Report) OK() bool { return len(r.Anomalies) == 0 }

// Count returns the number of anomalies of kind k.
func (r *Report) Count(k Kind) int { return r.Summary.Anomalies[k] }

// Check runs every check on h, key by key. It does not change h. Its cost
// is about linear in the size of the history (a sort by time, and maps).
func Check(h *History, o Options) *Report {
	c := newChecker(h, o)
	c.sanity()
	c.group()
	for _, key := range c.keyOrder {
		c.checkKey(c.keys[key])
	}
	r := &Report{Anomalies: c.out, Summary: Summarize(h)}
	for _, a := range c.out {
		r.Summary.Anomalies[a.Kind]++
	}
	return r
}

// finding gathers the instances of one kind on one key into one Anomaly.
type finding struct {
	kind         Kind
	key          string
	details      []string
	calls, execs []string
	seen         map[string]bool
	from, to     int64
}

const maxDetails = 3

func (f *finding) note(detail string, calls []*Call, execs []*Execution, c *checker) {
	f.details = append(f.details, detail)
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	widen := func(a, b int64) {
		if a <= 0 {
			return
		}
		if b <= 0 || b == forever {
			b = max(a, c.end)
		}
		if f.from == 0 || a < f.from {
			f.from = a
		}
		f.to = max(f.to, b)
	}
	for _, x := range calls {
		if !f.seen["c "+x.ID] {
			f.seen["c "+x.ID] = true
			f.calls = append(f.calls, x.ID)
		}
		widen(x.Invoke, x.Return)
	}
	for _, x := range execs {
		if !f.seen["e "+x.ID] {
			f.seen["e "+x.ID] = true
			f.execs = append(f.execs, x.ID)
		}
		widen(x.Start, x.End)
	}
}

// anomaly turns the finding into its Anomaly.
func (f *finding) anomaly(c *checker) Anomaly {
	d := strings.Join(f.details[:min(len(f.details), maxDetails)], "; ")
	if n := len(f.details) - maxDetails; n > 0 {
		d += fmt.Sprintf("; and %d more", n)
	}
	a := Anomaly{Kind: f.kind, Key: f.key, Detail: d, Calls: f.calls, Execs: f.execs, From: f.from, To: f.to}
	if f.from > 0 {
		for _, x := range c.faults {
			if x.Start > f.to {
				break
			}
			if orForever(x.End) >= f.from {
				a.Faults = append(a.Faults, x)
			}
		}
	}
	return a
}

// findings collects the findings of one key, one per kind.
type findings struct {
	c   *checker
	key string
	by  map[Kind]*finding
}

func (fs *findings) add(k Kind, detail string, calls []*Call, execs []*Execution) {
	fs.addUntil(k, detail, calls, execs, 0)
}

// addUntil is add with the anomaly's time extended to until (when the
// stores were read, say), so that it names the faults up to then.
func (fs *findings) addUntil(k Kind, detail string, calls []*Call, execs []*Execution, until int64) {
	if fs.by == nil {
		fs.by = map[Kind]*finding{}
	}
	f := fs.by[k]
	if f == nil {
		f = &finding{kind: k, key: fs.key}
		fs.by[k] = f
	}
	f.note(detail, calls, execs, fs.c)
	if until > 0 && f.from > 0 {
		f.to = max(f.to, until)
	}
}

// flush appends the key's anomalies in the order of Kinds.
func (fs *findings) flush() {
	for _, k := range Kinds {
		if f := fs.by[k]; f != nil {
			fs.c.out = append(fs.c.out, f.anomaly(fs.c))
		}
	}
	fs.by = nil
}
