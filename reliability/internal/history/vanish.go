package history

import "fmt"

// vanished is check 9: an execution that succeeded ends one of four ways.
// Its result is delivered to a caller, or kept (its completion accepted,
// or SQL holds it); or it is fenced (its completion refused, its work
// cancelled for a lost lease); or its process died before the Store could
// decide. Its completion may also still be pending when the history ends.
// One that did none of these — the Store never decided it — while the key
// was released and ran again is a second side effect nobody guarded: a
// handler a framework ran after the Store had answered and released the
// key, say, or a result the Store forgot. Keys whose record may have
// expired are skipped: their executions may be kept and then forgotten;
// so are keys finalised as not replayable, whose kept result (a
// middleware tombstone, or the Store's marker of a result too large) an
// undelivered success may be, and second runs after the key was done,
// which check 5 reports.
func (kc *keyCheck) vanished() {
	if kc.expired {
		return
	}
	for _, x := range kc.k.calls {
		if x.Outcome == NotReplayable {
			return // an undelivered success may be the one kept as not replayable
		}
	}
	execs := kc.k.execs
	for i, e := range execs {
		switch {
		case e.End == 0 || e.Failed:
			continue // not a success, or never seen to return
		case len(kc.received[e]) > 0 || e == kc.held || e.Completion != CompletionUnknown:
			continue // delivered, kept, or decided by the Store
		case e.Canceled > 0 && e.LeaseLost:
			continue // fenced while it ran
		case kc.killedAfter(e.Node, e.End):
			continue // its process died, perhaps before the Store decided
		}
		// The first execution of the key that started after e returned:
		// execs are by start, so it is after i.
		var next *Execution
		for _, y := range execs[i+1:] {
			if y.Start > e.End {
				next = y
				break
			}
		}
		if next == nil || next.Start > kc.done {
			continue // no second run, or check 5 reports it
		}
		var calls []*Call
		if x := kc.calls[e.Call]; x != nil {
			calls = append(calls, x)
		}
		kc.fs.add(VanishedSuccess, fmt.Sprintf("execution %s on %s succeeded at %s, but its result was neither delivered, kept nor refused, and execution %s on %s ran the key again at %s: the work ran twice, once unguarded",
			e.ID, e.Node, kc.at(e.End), next.ID, next.Node, kc.at(next.Start)), calls, []*Execution{e, next})
	}
}
