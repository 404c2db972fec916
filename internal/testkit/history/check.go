package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
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
	// Malformed (check 9): the history itself cannot be right.
	Malformed Kind = "malformed-history"
)

// Kinds lists every kind in the order of the checks.
var Kinds = []Kind{
	DuplicateExecution, CorruptResult, ForeignResult, RefusedRetry, RerunAfterSuccess,
	LostResult, SplitRecord, LeftClaimed, StaleOwner, Malformed,
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
	// lost lease. Default 1 s: the Store notices a lapsed lease at its next
	// renewal, which comes at once after a resume.
	CancelGrace time.Duration
}

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

// forever stands for a time that never came: an execution that never
// ended, a fault that never cleared.
const forever = math.MaxInt64

type span struct{ from, to int64 }

// checker holds the indexes of one Check.
type checker struct {
	h          *History
	grace      int64
	first, end int64 // the first and last times the history mentions

	calls   map[string]*Call
	execs   map[string]*Execution
	badCall map[*Call]bool      // excluded from the key checks
	badExec map[*Execution]bool // excluded from the key checks
	byValue map[string][]*Execution
	finals  map[string]*Final
	pauses  map[string][]span  // node → pauses, by start
	kills   map[string][]int64 // node → kill times, ascending
	faults  []Fault            // by start

	keys     map[string]*keyData
	keyOrder []string

	out []Anomaly
}

// keyData is everything recorded about one key.
type keyData struct {
	key   string
	calls []*Call      // by invoke
	execs []*Execution // by start
	final *Final
}

func newChecker(h *History, o Options) *checker {
	grace := o.CancelGrace
	if grace <= 0 {
		grace = time.Second
	}
	first, end := h.span()
	c := &checker{
		h: h, grace: int64(grace), first: first, end: end,
		calls: make(map[string]*Call, len(h.Calls)), execs: make(map[string]*Execution, len(h.Execs)),
		badCall: map[*Call]bool{}, badExec: map[*Execution]bool{},
		byValue: make(map[string][]*Execution, len(h.Execs)), finals: make(map[string]*Final, len(h.Finals)),
		pauses: map[string][]span{}, kills: map[string][]int64{},
		keys: map[string]*keyData{},
	}
	c.faults = slices.Clone(h.Faults)
	slices.SortStableFunc(c.faults, func(a, b Fault) int { return cmp.Compare(a.Start, b.Start) })
	for _, f := range c.faults {
		switch {
		case f.Node == "":
		case f.Kind == ProcessPause:
			c.pauses[f.Node] = append(c.pauses[f.Node], span{f.Start, orForever(f.End)})
		case f.Kind == ProcessKill:
			c.kills[f.Node] = append(c.kills[f.Node], f.Start)
		}
	}
	return c
}

func orForever(t int64) int64 {
	if t == 0 {
		return forever
	}
	return t
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

// sanity is check 9: what no store can cause. Records it finds broken are
// left out of the other checks.
func (c *checker) sanity() {
	fs := map[string]*findings{}
	bad := func(key, detail string, calls []*Call, execs []*Execution) {
		f := fs[key]
		if f == nil {
			f = &findings{c: c, key: key}
			fs[key] = f
		}
		f.add(Malformed, detail, calls, execs)
	}
	for _, p := range c.h.Problems {
		bad(p.Key, p.Detail, nil, nil)
	}
	for i := range c.h.Calls {
		x := &c.h.Calls[i]
		switch {
		case c.calls[x.ID] != nil:
			bad(x.Key, fmt.Sprintf("call ID %s used twice", x.ID), []*Call{x}, nil)
			c.badCall[x] = true
			continue
		case x.Invoke <= 0:
			bad(x.Key, fmt.Sprintf("call %s returned but was never invoked", x.ID), []*Call{x}, nil)
			c.badCall[x] = true
		case x.Return != 0 && x.Return < x.Invoke:
			bad(x.Key, fmt.Sprintf("call %s returned %s before it was invoked", x.ID, time.Duration(x.Invoke-x.Return)), []*Call{x}, nil)
			c.badCall[x] = true
		case x.Return == 0 && x.Outcome != Unknown:
			bad(x.Key, fmt.Sprintf("call %s has an outcome (%s) but no return time", x.ID, x.Outcome), []*Call{x}, nil)
			c.badCall[x] = true
		case x.Return != 0 && x.Outcome == Unknown:
			bad(x.Key, fmt.Sprintf("call %s returned without an outcome", x.ID), []*Call{x}, nil)
			c.badCall[x] = true
		}
		c.calls[x.ID] = x
	}
	for i := range c.h.Execs {
		e := &c.h.Execs[i]
		switch {
		case c.execs[e.ID] != nil:
			bad(e.Key, fmt.Sprintf("execution ID %s used twice", e.ID), nil, []*Execution{e})
			c.badExec[e] = true
			continue
		case e.Start <= 0:
			bad(e.Key, fmt.Sprintf("execution %s ended but never started", e.ID), nil, []*Execution{e})
			c.badExec[e] = true
		case e.End != 0 && e.End < e.Start:
			bad(e.Key, fmt.Sprintf("execution %s ended before it started", e.ID), nil, []*Execution{e})
			c.badExec[e] = true
		case e.Failed && e.Completion == CompletionAccepted:
			bad(e.Key, fmt.Sprintf("execution %s failed, yet its completion was accepted", e.ID), nil, []*Execution{e})
			c.badExec[e] = true
		}
		c.execs[e.ID] = e
	}
	// Links between calls and executions.
	namedBy := map[*Execution]*Call{}
	for i := range c.h.Calls {
		x := &c.h.Calls[i]
		if c.calls[x.ID] != x {
			continue
		}
		if x.Outcome == Executed && x.Exec == "" {
			bad(x.Key, fmt.Sprintf("call %s executed but names no execution", x.ID), []*Call{x}, nil)
			c.badCall[x] = true
			continue
		}
		if x.Exec == "" {
			continue
		}
		e := c.execs[x.Exec]
		switch {
		case e == nil:
			bad(x.Key, fmt.Sprintf("call %s names execution %s, which was never recorded", x.ID, x.Exec), []*Call{x}, nil)
		case e.Node != x.Node || e.Key != x.Key || e.Fingerprint != x.Fingerprint:
			bad(x.Key, fmt.Sprintf("call %s (node %s, key %q, fingerprint %q) names execution %s of node %s, key %q, fingerprint %q",
				x.ID, x.Node, x.Key, x.Fingerprint, e.ID, e.Node, e.Key, e.Fingerprint), []*Call{x}, []*Execution{e})
		case e.Call != "" && e.Call != x.ID:
			bad(x.Key, fmt.Sprintf("call %s names execution %s, which ran for call %s", x.ID, e.ID, e.Call), []*Call{x}, []*Execution{e})
		case namedBy[e] != nil:
			bad(x.Key, fmt.Sprintf("calls %s and %s both name execution %s as their own", namedBy[e].ID, x.ID, e.ID), []*Call{namedBy[e], x}, []*Execution{e})
		case x.Outcome == Executed && e.End == 0:
			bad(x.Key, fmt.Sprintf("call %s executed, but the end of its execution %s was never recorded", x.ID, e.ID), []*Call{x}, []*Execution{e})
		default:
			namedBy[e] = x
			continue
		}
		c.badCall[x] = true
	}
	for i := range c.h.Execs {
		e := &c.h.Execs[i]
		if c.execs[e.ID] != e || e.Call == "" {
			continue
		}
		x := c.calls[e.Call]
		switch {
		case x == nil:
			bad(e.Key, fmt.Sprintf("execution %s ran for call %s, which was never recorded", e.ID, e.Call), nil, []*Execution{e})
		case e.Node != x.Node || e.Key != x.Key || e.Fingerprint != x.Fingerprint:
			bad(e.Key, fmt.Sprintf("execution %s (node %s, key %q, fingerprint %q) ran for call %s of node %s, key %q, fingerprint %q",
				e.ID, e.Node, e.Key, e.Fingerprint, x.ID, x.Node, x.Key, x.Fingerprint), []*Call{x}, []*Execution{e})
		case x.Invoke > 0 && e.Start < x.Invoke:
			bad(e.Key, fmt.Sprintf("execution %s started before its call %s was invoked", e.ID, x.ID), []*Call{x}, []*Execution{e})
		default:
			continue
		}
		c.badExec[e] = true
	}
	for i := range c.h.Faults {
		f := &c.h.Faults[i]
		switch {
		case f.Start <= 0:
			bad("", fmt.Sprintf("fault %s (%s) has no start", f.ID, f.Kind), nil, nil)
		case f.End != 0 && f.End < f.Start:
			bad("", fmt.Sprintf("fault %s (%s) ended before it began", f.ID, f.Kind), nil, nil)
		case (f.Kind == ProcessPause || f.Kind == ProcessKill) && f.Node == "":
			bad("", fmt.Sprintf("fault %s (%s) names no node", f.ID, f.Kind), nil, nil)
		}
	}
	for i := range c.h.Finals {
		f := &c.h.Finals[i]
		if c.finals[f.Key] != nil {
			bad(f.Key, fmt.Sprintf("two final states for key %q", f.Key), nil, nil)
			continue
		}
		c.finals[f.Key] = f
	}
	keys := make([]string, 0, len(fs))
	for k := range fs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fs[k].flush()
	}
}

// group sorts the good records by key and time and indexes the ended
// executions by value.
func (c *checker) group() {
	get := func(key string) *keyData {
		k := c.keys[key]
		if k == nil {
			k = &keyData{key: key}
			c.keys[key] = k
			c.keyOrder = append(c.keyOrder, key)
		}
		return k
	}
	for i := range c.h.Calls {
		x := &c.h.Calls[i]
		if !c.badCall[x] && c.calls[x.ID] == x {
			k := get(x.Key)
			k.calls = append(k.calls, x)
		}
	}
	for i := range c.h.Execs {
		e := &c.h.Execs[i]
		if c.badExec[e] || c.execs[e.ID] != e {
			continue
		}
		k := get(e.Key)
		k.execs = append(k.execs, e)
		if e.End != 0 {
			v := string(e.Value)
			c.byValue[v] = append(c.byValue[v], e)
		}
	}
	for key, f := range c.finals {
		get(key).final = f
	}
	slices.Sort(c.keyOrder)
	var missing []string
	for _, key := range c.keyOrder {
		k := c.keys[key]
		slices.SortStableFunc(k.calls, func(a, b *Call) int { return cmp.Or(cmp.Compare(a.Invoke, b.Invoke), strings.Compare(a.ID, b.ID)) })
		slices.SortStableFunc(k.execs, func(a, b *Execution) int { return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.ID, b.ID)) })
		if len(c.finals) > 0 && k.final == nil {
			missing = append(missing, key)
		}
	}
	for _, key := range missing {
		fs := &findings{c: c, key: key}
		fs.add(Malformed, fmt.Sprintf("no final state was read for key %q, though other keys have one", key), nil, nil)
		fs.flush()
	}
}

// effEnd is when e stopped running: its end, else its process's kill,
// else forever (it was running when the history ended).
func (c *checker) effEnd(e *Execution) int64 {
	if e.End != 0 {
		return e.End
	}
	for _, k := range c.kills[e.Node] {
		if k >= e.Start {
			return k
		}
	}
	return forever
}

// killedAfter reports whether node was killed at or after t.
func (c *checker) killedAfter(node string, t int64) bool {
	ks := c.kills[node]
	return len(ks) > 0 && ks[len(ks)-1] >= t
}

// pausedWithin reports whether node was paused at some moment of [from, to].
func (c *checker) pausedWithin(node string, from, to int64) bool {
	for _, p := range c.pauses[node] {
		if p.from > to {
			break
		}
		if p.to >= from {
			return true
		}
	}
	return false
}

// deadline is when a stale owner on node must have stopped, or had its
// work cancelled, when it went stale at t: grace after t, counting only
// time its process was running.
func (c *checker) deadline(node string, t int64) int64 {
	ps := c.pauses[node]
	i := 0
	for ; i < len(ps) && ps[i].from <= t; i++ {
		if ps[i].to > t {
			t = ps[i].to // stopped at t: it can act only once resumed
		}
	}
	if t == forever {
		return forever
	}
	d := t + c.grace
	for ; i < len(ps) && ps[i].from <= d; i++ {
		if ps[i].to == forever {
			return forever
		}
		d += ps[i].to - max(ps[i].from, t)
	}
	return d
}

// at renders a history time relative to the history's start, for details.
func (c *checker) at(t int64) string {
	if t == forever || t <= 0 {
		return "the end"
	}
	return "+" + time.Duration(t-c.first).String()
}
