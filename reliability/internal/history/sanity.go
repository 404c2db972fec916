package history

import (
	"fmt"
	"slices"
	"time"
)

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
