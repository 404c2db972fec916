package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// forever stands for a time that never came: an execution that never
// ended, a fault that never cleared.
const forever = math.MaxInt64

type span struct{ from, to int64 }

// checker holds the indexes of one Check.
type checker struct {
	h          *History
	grace      int64
	waitBound  int64                          // 0: check 11 off
	slowing    map[FaultKind]bool             // the kinds that excuse a long wait
	retention  func(key string) time.Duration // nil: check 10 off
	slack      int64                          // added to a record's expiry
	first, end int64                          // the first and last times the history mentions

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
	slack := o.ExpirySlack
	if slack <= 0 {
		slack = time.Second
	}
	slowing := o.Slowing
	if slowing == nil {
		slowing = DefaultSlowing
	}
	first, end := h.span()
	c := &checker{
		h: h, grace: int64(grace), first: first, end: end,
		waitBound: int64(max(o.WaitBound, 0)), slowing: map[FaultKind]bool{},
		retention: o.Retention, slack: int64(slack),
		calls: make(map[string]*Call, len(h.Calls)), execs: make(map[string]*Execution, len(h.Execs)),
		badCall: map[*Call]bool{}, badExec: map[*Execution]bool{},
		byValue: make(map[string][]*Execution, len(h.Execs)), finals: make(map[string]*Final, len(h.Finals)),
		pauses: map[string][]span{}, kills: map[string][]int64{},
		keys: map[string]*keyData{},
	}
	for _, k := range slowing {
		c.slowing[k] = true
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
