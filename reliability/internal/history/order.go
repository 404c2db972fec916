package history

import (
	"fmt"
	"strings"
)

// mismatches is check 4: a mismatch refuses a call because the key is
// bound to another fingerprint, never for its own.
func (kc *keyCheck) mismatches() {
	// The earliest use of the key, and the earliest by another fingerprint
	// than that one's: whatever fingerprint a mismatch has, the earliest
	// use by any other is one of the two.
	var first, second int64 = forever, forever
	var fp1 string
	see := func(t int64, fp string) {
		switch {
		case t < first && fp != fp1:
			first, second, fp1 = t, first, fp
		case t < first:
			first = t
		case fp != fp1 && t < second:
			second = t
		}
	}
	for _, x := range kc.k.calls {
		see(x.Invoke, x.Fingerprint)
	}
	for _, e := range kc.k.execs {
		see(e.Start, e.Fingerprint)
	}
	// The fingerprint the key is bound to, if every winner agrees, and when
	// a caller of it was first told so.
	bound, boundAt, boundBy := "", int64(forever), (*Call)(nil)
	if len(kc.winners) > 0 && !kc.expired {
		bound = kc.winners[0].Fingerprint
		for _, w := range kc.winners[1:] {
			if w.Fingerprint != bound {
				bound = ""
			}
		}
		for _, x := range kc.k.calls {
			if kc.src[x] != nil && x.Fingerprint == bound && x.Return < boundAt {
				boundAt, boundBy = x.Return, x
			}
		}
	}
	for _, m := range kc.k.calls {
		if m.Outcome != Mismatch {
			continue
		}
		other := first
		if m.Fingerprint == fp1 {
			other = second
		}
		switch {
		case other > m.Return:
			kc.fs.add(RefusedRetry, fmt.Sprintf("call %s (fingerprint %q) was refused as a mismatch, but no request with another fingerprint had used the key yet", m.ID, m.Fingerprint), []*Call{m}, nil)
		case bound != "" && m.Fingerprint == bound && boundAt < m.Invoke:
			kc.fs.add(RefusedRetry, fmt.Sprintf("call %s (fingerprint %q) was refused as a mismatch, but the key had completed with that very fingerprint: call %s was told %s at %s",
				m.ID, m.Fingerprint, boundBy.ID, boundBy.Outcome, kc.at(boundAt)), []*Call{m, boundBy}, nil)
		}
	}
}

// suspect reports whether e may have started on a claim that had already
// lapsed: its process was paused between its call and its start.
func (kc *keyCheck) suspect(e *Execution) bool {
	from := e.Start
	if x := kc.calls[e.Call]; x != nil && x.Invoke > 0 {
		from = x.Invoke
	}
	return kc.pausedWithin(e.Node, from, e.Start)
}

// fenced reports whether e, stale from t on, was fenced off: its result
// neither kept nor delivered, and its work stopped or cancelled for a lost
// lease within the grace (counting only time its process ran). why says
// what failed.
func (kc *keyCheck) fenced(e *Execution, t int64) (ok bool, why []string) {
	if e.Completion == CompletionAccepted {
		why = append(why, "its completion was accepted")
	}
	if e == kc.held {
		why = append(why, "SQL holds its result")
	}
	if cs := kc.received[e]; len(cs) > 0 {
		why = append(why, fmt.Sprintf("call %s was told %s with its result", cs[0].ID, cs[0].Outcome))
	}
	d := kc.deadline(e.Node, t)
	end := kc.effEnd(e)
	switch {
	case end <= d:
	case e.Canceled > 0 && e.LeaseLost && e.Canceled <= d:
	case end == forever && d >= kc.end:
		// The history ended before the deadline: nothing to tell.
	case e.Canceled > 0 && e.LeaseLost:
		why = append(why, fmt.Sprintf("its work ran on and was cancelled only at %s, past the grace (deadline %s)", kc.at(e.Canceled), kc.at(d)))
	case e.Canceled > 0:
		why = append(why, fmt.Sprintf("its work ran on to %s and its context was cancelled at %s for another cause (%s), not a lost lease", kc.at(end), kc.at(e.Canceled), e.Cause))
	case end == forever:
		why = append(why, fmt.Sprintf("it was never seen to end nor cancelled (deadline %s): its process hung, or died with no fault recorded", kc.at(d)))
	default:
		why = append(why, fmt.Sprintf("its work ran on to %s and its context was never cancelled (deadline %s)", kc.at(end), kc.at(d)))
	}
	return len(why) == 0, why
}

// settle is when e's claim ended at the latest, as far as the history
// tells: its end, or the acceptance of its completion.
func (kc *keyCheck) settle(e *Execution) int64 {
	end := kc.effEnd(e)
	if e.Completion == CompletionAccepted && e.Completed > end {
		return e.Completed
	}
	return end
}

// order is checks 5 and 8, in one pass over the executions by start.
//
// Check 5: no execution started once the key was done, unless its
// record expired. One that may have started on a claim lapsed while its
// process was paused is a stale owner instead, and must be fenced.
//
// Check 8: an execution that another one (not itself suspect) started
// during was taken over, and must be fenced from then on. When the later
// one is suspect, one of the two must be.
func (kc *keyCheck) order() {
	type live struct {
		e         *Execution
		settle    int64
		takenOver bool
	}
	var active []*live
	for _, y := range kc.k.execs {
		sy := kc.suspect(y)
		rerun := false
		if !kc.expired && y.Start > kc.done {
			rerun = true
			switch {
			case !sy && kc.dup && kc.inS[y]:
				// Check 1 reported it; no fence failed that could say why.
			case !sy:
				calls, execs := kc.afterDone(y)
				kc.fs.add(RerunAfterSuccess, fmt.Sprintf("execution %s on %s started at %s, after the key was done: %s", y.ID, y.Node, kc.at(y.Start), kc.doneBy()), calls, execs)
			default:
				if ok, why := kc.fenced(y, y.Start); !ok {
					calls, execs := kc.afterDone(y)
					kc.fs.add(StaleOwner, fmt.Sprintf("execution %s started at %s, after the key was done (%s), on a claim its paused process may have lost, and was not fenced: %s",
						y.ID, kc.at(y.Start), kc.doneBy(), strings.Join(why, "; ")), calls, execs)
				}
			}
		}
		n := 0
		for _, x := range active {
			if x.settle > y.Start {
				active[n] = x
				n++
			}
		}
		active = active[:n]
		for _, x := range active {
			if !sy {
				if x.takenOver {
					continue
				}
				x.takenOver = true
				if ok, why := kc.fenced(x.e, y.Start); !ok {
					kc.fs.add(StaleOwner, fmt.Sprintf("execution %s on %s was taken over by %s on %s at %s and was not fenced: %s",
						x.e.ID, x.e.Node, y.ID, y.Node, kc.at(y.Start), strings.Join(why, "; ")), nil, []*Execution{x.e, y})
				}
				continue
			}
			if rerun {
				continue // reported above
			}
			okx, whyx := kc.fenced(x.e, y.Start)
			oky, whyy := kc.fenced(y, y.Start)
			if !okx && !oky {
				kc.fs.add(StaleOwner, fmt.Sprintf("executions %s on %s and %s on %s (whose paused process may have lost its claim) overlapped from %s and neither was fenced: %s: %s; %s: %s",
					x.e.ID, x.e.Node, y.ID, y.Node, kc.at(y.Start), x.e.ID, strings.Join(whyx, ", "), y.ID, strings.Join(whyy, ", ")), nil, []*Execution{x.e, y})
			}
		}
		active = append(active, &live{e: y, settle: kc.settle(y)})
	}
}

// afterDone returns what made the key done and the execution y that came
// after it, for an anomaly about the two.
func (kc *keyCheck) afterDone(y *Execution) ([]*Call, []*Execution) {
	var calls []*Call
	var execs []*Execution
	if kc.doneCall != nil {
		calls = append(calls, kc.doneCall)
	}
	if kc.doneExec != nil {
		execs = append(execs, kc.doneExec)
	}
	return calls, append(execs, y)
}
