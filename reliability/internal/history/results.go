package history

import (
	"bytes"
	"fmt"
	"strings"
)

// classify finds the execution that produced v for this key and
// fingerprint fp (best), or else another one that produced the same bytes
// (other): of this key for another fingerprint, failed, or of another key.
func (kc *keyCheck) classify(v []byte, fp string) (best, other *Execution) {
	for _, e := range kc.byValue[string(v)] {
		if e.Fingerprint != fp || e.Failed {
			if other == nil {
				other = e
			}
			continue
		}
		if best == nil || kc.rank(e) < kc.rank(best) {
			best = e // equal bytes from two executions: the likeliest one
		}
	}
	if best == nil && other == nil {
		for _, e := range kc.checker.byValue[string(v)] {
			if e.Key != kc.k.key {
				return nil, e
			}
		}
	}
	return best, other
}

// rank orders executions with equal values by how likely a caller got
// theirs: the one SQL holds, an accepted one, one already received.
func (kc *keyCheck) rank(e *Execution) int {
	switch {
	case e == kc.held:
		return 0
	case e.Completion == CompletionAccepted:
		return 1
	case len(kc.received[e]) > 0:
		return 2
	}
	return 3
}

// whose describes an execution that produced bytes a caller (or record)
// for fingerprint fp should not have had.
func (kc *keyCheck) whose(e *Execution, fp string) string {
	switch {
	case e.Key != kc.k.key:
		return fmt.Sprintf("the result of execution %s of another key, %q", e.ID, e.Key)
	case e.Fingerprint != fp:
		return fmt.Sprintf("the result of execution %s for fingerprint %q, not %q", e.ID, e.Fingerprint, fp)
	default:
		return fmt.Sprintf("the value of execution %s, which failed (%s): a failed execution's value is nobody's result", e.ID, e.Err)
	}
}

// diff describes how got differs from want.
func diff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes for %d, first difference at byte %d", len(got), len(want), i)
}

func (kc *keyCheck) source(x *Call, e *Execution) {
	kc.src[x] = e
	kc.received[e] = append(kc.received[e], x)
}

// provenance is checks 2 and 3: every successful caller got the bytes of
// a successful execution of its own key and fingerprint. It also finds
// which execution each one received.
func (kc *keyCheck) provenance() {
	for _, x := range kc.k.calls {
		switch x.Outcome {
		case Executed:
			e := kc.execs[x.Exec]
			switch {
			case e.Failed:
				kc.fs.add(ForeignResult, fmt.Sprintf("call %s succeeded as the owner, but its execution %s failed (%s)", x.ID, e.ID, e.Err), []*Call{x}, []*Execution{e})
			case !bytes.Equal(x.Value, e.Value):
				if best, other := kc.classify(x.Value, x.Fingerprint); best != nil || other != nil {
					kc.fs.add(ForeignResult, fmt.Sprintf("call %s ran execution %s but got %s", x.ID, e.ID, kc.whose(cmpOr(best, other), x.Fingerprint)), []*Call{x}, []*Execution{e, cmpOr(best, other)})
				} else {
					kc.fs.add(CorruptResult, fmt.Sprintf("call %s got bytes that its execution %s did not return, nor any other (%s)", x.ID, e.ID, diff(x.Value, e.Value)), []*Call{x}, []*Execution{e})
				}
			case kc.streamedStale(e):
				// The stream left before its tombstone, which its owner,
				// stopped past its lease, never stored: the documented limit
				// of a streamed response (see streamedStale). Its caller's
				// bytes make nothing done.
			default:
				kc.source(x, e)
			}
		case Replayed:
			best, other := kc.classify(x.Value, x.Fingerprint)
			switch {
			case best != nil:
				kc.source(x, best)
			case other != nil:
				kc.fs.add(ForeignResult, fmt.Sprintf("call %s (fingerprint %q) was replayed %s", x.ID, x.Fingerprint, kc.whose(other, x.Fingerprint)), []*Call{x}, []*Execution{other})
			default:
				d := fmt.Sprintf("call %s was replayed %d bytes that no execution produced", x.ID, len(x.Value))
				var rel []*Execution
				if e := kc.resultOf(x.Fingerprint); e != nil {
					d += fmt.Sprintf("; the key's result is execution %s's: %s", e.ID, diff(x.Value, e.Value))
					rel = append(rel, e)
				}
				kc.fs.add(CorruptResult, d, []*Call{x}, rel)
			}
		case NotReplayable:
			if e := kc.execs[x.Exec]; e != nil && !e.Failed && e.End != 0 {
				kc.source(x, e)
			}
		}
	}
}

// streamedStale reports whether e's result is a stream (a tombstone's)
// whose owner's process was stopped between e's start and the end of its
// completion, which the deciding tier did not accept. A streamed response
// leaves before its tombstone is stored; an owner stopped past its lease
// then loses the key to another instance, which runs it again, while its
// first caller keeps what it was streamed. The middleware's documentation
// says so, and a response held until its completion (every other ending,
// and every ending in the atomic mode) is never delivered then.
func (kc *keyCheck) streamedStale(e *Execution) bool {
	if !e.Tombstone || e.Completion == CompletionAccepted {
		return false
	}
	until := kc.end
	if e.Completed > 0 {
		until = e.Completed
	}
	return kc.pausedWithin(e.Node, e.Start, until)
}

func cmpOr(a, b *Execution) *Execution {
	if a != nil {
		return a
	}
	return b
}

// resultOf returns the execution whose result is the key's for
// fingerprint fp, to compare bad bytes with: the one SQL holds, else the
// first whose owner got its value.
func (kc *keyCheck) resultOf(fp string) *Execution {
	if kc.held != nil && kc.held.Fingerprint == fp {
		return kc.held
	}
	if kc.firstOf == nil {
		kc.firstOf = map[string]*Execution{}
		for _, x := range kc.k.calls {
			e := kc.execs[x.Exec]
			if x.Outcome == Executed && !e.Failed && bytes.Equal(x.Value, e.Value) && kc.firstOf[e.Fingerprint] == nil {
				kc.firstOf[e.Fingerprint] = e
			}
		}
	}
	return kc.firstOf[fp]
}

// duplicates is check 1: at most one execution of the key had its result
// received by a caller or kept by a store.
func (kc *keyCheck) duplicates() {
	for _, e := range kc.k.execs {
		if len(kc.received[e]) > 0 || (e.Completion == CompletionAccepted && !e.Failed) || e == kc.held {
			kc.inS[e] = true
			kc.winners = append(kc.winners, e)
		}
	}
	for _, w := range kc.winners {
		if t := kc.doneAt(w); t < kc.done {
			kc.done, kc.doneExec = t, w
		}
	}
	for _, x := range kc.k.calls {
		if (kc.src[x] != nil || x.Outcome == NotReplayable) && x.Return < kc.done {
			kc.done, kc.doneCall, kc.doneExec = x.Return, x, nil
		}
	}
	if kc.expired || len(kc.winners) < 2 {
		return
	}
	kc.dup = true
	parts := make([]string, len(kc.winners))
	var calls []*Call
	for i, w := range kc.winners {
		parts[i] = fmt.Sprintf("%s on %s (%s)", w.ID, w.Node, kc.fate(w))
		calls = append(calls, kc.received[w]...)
	}
	kc.fs.add(DuplicateExecution, fmt.Sprintf("%d executions of the key had their result delivered or kept: %s", len(kc.winners), strings.Join(parts, ", ")), calls, kc.winners)
}

// doneAt is when winner w made the key done: when fn returned, for a
// result delivered to a caller; when it was accepted, for one only kept
// (between the two another owner may take a lapsed claim over, and the
// completion must then fail).
func (kc *keyCheck) doneAt(w *Execution) int64 {
	if len(kc.received[w]) == 0 && w.Completed > 0 {
		return w.Completed
	}
	return cmpTime(w.End, w.Completed)
}

// doneBy says what made the key done.
func (kc *keyCheck) doneBy() string {
	if x := kc.doneCall; x != nil {
		return fmt.Sprintf("call %s was told %s at %s", x.ID, x.Outcome, kc.at(x.Return))
	}
	w := kc.doneExec
	what := "returned"
	if len(kc.received[w]) == 0 && w.Completed > 0 {
		what = "was accepted"
	}
	return fmt.Sprintf("execution %s, whose result was %s, %s at %s", w.ID, kc.fate(w), what, kc.at(kc.done))
}

// cmpTime returns the first non-zero time of ts, else forever.
func cmpTime(ts ...int64) int64 {
	for _, t := range ts {
		if t > 0 {
			return t
		}
	}
	return forever
}

// fate says what became of a winner's result.
func (kc *keyCheck) fate(e *Execution) string {
	var s []string
	if cs := kc.received[e]; len(cs) > 0 {
		ids := make([]string, 0, min(len(cs), 3))
		for _, x := range cs[:min(len(cs), 3)] {
			ids = append(ids, x.ID)
		}
		more := ""
		if len(cs) > 3 {
			more = fmt.Sprintf(" and %d more", len(cs)-3)
		}
		s = append(s, "delivered to "+strings.Join(ids, ", ")+more)
	}
	if e.Completion == CompletionAccepted {
		s = append(s, "accepted")
	}
	if e == kc.held {
		s = append(s, "held by SQL")
	}
	if len(s) == 0 {
		return "neither delivered nor kept"
	}
	return strings.Join(s, ", ")
}
