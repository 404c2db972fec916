package history

import (
	"fmt"
	"slices"
)

// releases is check 13: an execution whose ending released the key (it
// failed: a 5xx, a panic, a transaction that did not commit) or finalised
// it as not replayable (a tombstone) answered its own caller only. A call
// that got its bytes, other than the execution's own, was replayed what
// was never the key's result: a retry that should have run the work again
// (or been told the result cannot be replayed) was told the first
// attempt's failure, or given half a stream. Calls of the same process
// that were made while the execution ran are excused: they joined it in
// that process, and share its ending: up to when its own caller was
// answered, since the Store releases the key after fn returned. A caller told success with a
// failed execution's value is check 3's (ForeignResult).
func (kc *keyCheck) releases() {
	for _, x := range kc.k.calls {
		if len(x.Value) == 0 {
			continue
		}
		for _, e := range kc.byValue[string(x.Value)] {
			if !e.Failed && !e.Tombstone || x.Exec == e.ID || e.Call == x.ID {
				continue
			}
			if e.Failed && x.Outcome.Succeeded() {
				continue // check 3 reports a failure's value told as a success
			}
			if x.Node == e.Node && x.Invoke <= kc.sharedUntil(e) {
				continue
			}
			what := "released the key"
			if !e.Failed {
				what = "finalised it as not replayable"
			}
			kc.fs.add(ReplayedRelease, fmt.Sprintf("call %s (%s) got the answer of execution %s, whose ending (%s) %s", x.ID, x.Outcome, e.ID, endingName(e), what), []*Call{x}, []*Execution{e})
		}
	}
}

// sharedUntil is until when a call of e's process may have joined e: its
// own call's return (the Store releases the key after fn returns, and
// callers that join meanwhile share the release), else its end.
func (kc *keyCheck) sharedUntil(e *Execution) int64 {
	t := kc.effEnd(e)
	if x := kc.calls[e.Call]; x != nil && x.Return > t {
		t = x.Return
	}
	return t
}

func endingName(e *Execution) string {
	if e.Ending != "" {
		return e.Ending
	}
	if e.Failed {
		return "failed: " + e.Err
	}
	return "success"
}

// effects is check 14, on the side effects that commit with the key's
// record (Final.Effects): at most one execution of a key committed one,
// never an execution that ended uncommitted, and the record holds the
// result of the one that did. Keys whose record may have expired are
// skipped: the work may rightly have run again.
func (kc *keyCheck) effects() {
	f := kc.k.final
	if f == nil || len(f.Effects) == 0 || kc.expired {
		return
	}
	ids := slices.Clone(f.Effects)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var execs []*Execution
	for _, id := range ids {
		e := kc.execs[id]
		if e == nil || e.Key != kc.k.key {
			kc.fs.addUntil(StrayEffect, fmt.Sprintf("a side effect committed by %s, which is no execution of the key", id), nil, nil, f.At)
			continue
		}
		execs = append(execs, e)
	}
	if len(f.Effects) > 1 {
		kc.fs.addUntil(DuplicateEffect, fmt.Sprintf("%d side effects committed for the key, by %v", len(f.Effects), f.Effects), nil, execs, f.At)
	}
	for _, e := range execs {
		switch {
		case e.Failed:
			kc.fs.addUntil(StrayEffect, fmt.Sprintf("execution %s ended uncommitted (%s: %s), yet its side effect committed", e.ID, endingName(e), e.Err), nil, []*Execution{e}, f.At)
		case f.SQL.State == NotRead:
		case f.SQL.State != Completed:
			kc.fs.addUntil(StrayEffect, fmt.Sprintf("execution %s committed its side effect, but SQL's record is %s", e.ID, f.SQL.State), nil, []*Execution{e}, f.At)
		case kc.held != e && !e.Tombstone:
			d := fmt.Sprintf("execution %s committed its side effect, but SQL holds another result", e.ID)
			if kc.held != nil {
				d += fmt.Sprintf(", execution %s's", kc.held.ID)
			}
			kc.fs.addUntil(StrayEffect, d, nil, []*Execution{e}, f.At)
		}
	}
}
