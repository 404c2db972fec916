package history

import (
	"bytes"
	"fmt"
	"strings"
)

// keyCheck is the analysis of one key.
type keyCheck struct {
	*checker
	k       *keyData
	fs      findings
	expired bool

	// byValue indexes the key's ended executions by value.
	byValue map[string][]*Execution
	// src is the execution whose result each successful call received
	// (for NotReplayable, the owner's execution, which ran and was kept).
	src map[*Call]*Execution
	// received lists, per execution, the calls that received its result.
	received map[*Execution][]*Call
	// held is the execution whose result SQL holds at the end, if any.
	held *Execution
	// winners are the executions whose result was received or kept; more
	// than one is check 1's anomaly (dup).
	winners []*Execution
	inS     map[*Execution]bool
	dup     bool
	// firstOf caches resultOf.
	firstOf map[string]*Execution
	// done is when the key was first known to be done (check 5), and
	// doneCall or doneExec what said so (see doneBy).
	done     int64
	doneCall *Call
	doneExec *Execution
}

func (c *checker) checkKey(k *keyData) {
	kc := &keyCheck{
		checker: c, k: k, fs: findings{c: c, key: k.key},
		expired: k.final != nil && k.final.Expired,
		byValue: map[string][]*Execution{}, src: map[*Call]*Execution{},
		received: map[*Execution][]*Call{}, inS: map[*Execution]bool{},
		done: forever,
	}
	for _, e := range k.execs {
		if e.End != 0 {
			kc.byValue[string(e.Value)] = append(kc.byValue[string(e.Value)], e)
		}
	}
	if f := k.final; f != nil && f.SQL.State == Completed {
		kc.held, _ = kc.classify(f.SQL.Value, f.SQL.Fingerprint)
	}
	kc.provenance()
	kc.duplicates()
	kc.mismatches()
	kc.order()
	kc.finalState()
	kc.fs.flush()
}

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
		if kc.src[x] != nil && x.Return < kc.done {
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

// finalState is checks 6 and 7, and the provenance of the final records.
func (kc *keyCheck) finalState() {
	f := kc.k.final
	if f == nil {
		return
	}
	nr := false
	for _, x := range kc.k.calls {
		nr = nr || x.Outcome == NotReplayable
	}
	// A completed record holds a real result of this key and fingerprint
	// (a key finalised as not replayable holds a marker instead).
	recordOK := func(store string, s Stored) bool {
		if s.State != Completed || nr {
			return true
		}
		best, other := kc.classify(s.Value, s.Fingerprint)
		switch {
		case best != nil:
			return true
		case other != nil:
			kc.fs.add(ForeignResult, fmt.Sprintf("%s's completed record (fingerprint %q) holds %s", store, s.Fingerprint, kc.whose(other, s.Fingerprint)), nil, []*Execution{other})
		default:
			kc.fs.add(CorruptResult, fmt.Sprintf("%s's completed record holds %d bytes that no execution produced", store, len(s.Value)), nil, nil)
		}
		return false
	}
	sqlOK := recordOK("SQL", f.SQL)
	redisOK := recordOK("Redis", f.Redis)

	if f.SQL.State == InProgress && !kc.lastCallKilled() {
		kc.fs.addUntil(LeftClaimed, fmt.Sprintf("SQL still holds a claim (fingerprint %q) after every lease lapsed", f.SQL.Fingerprint), kc.lastCalls(), nil, f.At)
	}
	if f.Redis.State == InProgress {
		kc.fs.addUntil(LeftClaimed, fmt.Sprintf("Redis still holds a claim (fingerprint %q) after every lease lapsed: a claim without a TTL", f.Redis.Fingerprint), kc.lastCalls(), nil, f.At)
	}
	if kc.expired || f.SQL.State == NotRead {
		return
	}
	// Durability: what callers were told is what SQL holds.
	var ack *Call
	values := map[string]bool{}
	for _, x := range kc.k.calls {
		if kc.src[x] == nil {
			continue
		}
		if ack == nil {
			ack = x
		}
		if x.Outcome.Succeeded() {
			values[string(x.Value)] = true
		}
	}
	if ack != nil && sqlOK {
		switch {
		case f.SQL.State != Completed:
			kc.fs.addUntil(LostResult, fmt.Sprintf("call %s was told %s, but SQL's record is %s", ack.ID, ack.Outcome, f.SQL.State), []*Call{ack}, []*Execution{kc.src[ack]}, f.At)
		case f.SQL.Fingerprint != ack.Fingerprint:
			kc.fs.addUntil(LostResult, fmt.Sprintf("call %s (fingerprint %q) was told %s, but SQL's record is bound to fingerprint %q", ack.ID, ack.Fingerprint, ack.Outcome, f.SQL.Fingerprint), []*Call{ack}, []*Execution{kc.src[ack]}, f.At)
		case len(values) > 0 && !values[string(f.SQL.Value)]:
			d := fmt.Sprintf("call %s was told %s, but SQL holds other bytes (%s)", ack.ID, ack.Outcome, diff(f.SQL.Value, ack.Value))
			if kc.held != nil {
				d += fmt.Sprintf(", the result of execution %s", kc.held.ID)
			}
			kc.fs.addUntil(LostResult, d, []*Call{ack}, []*Execution{kc.src[ack]}, f.At)
		}
	}
	if f.Redis.State == Completed && sqlOK && redisOK && !nr {
		var execs []*Execution
		if e, _ := kc.classify(f.Redis.Value, f.Redis.Fingerprint); e != nil {
			execs = append(execs, e)
		}
		if kc.held != nil {
			execs = append(execs, kc.held)
		}
		switch {
		case f.SQL.State != Completed:
			kc.fs.addUntil(SplitRecord, fmt.Sprintf("Redis holds a completed result (fingerprint %q) but SQL's record is %s: a replay from Redis answers what SQL never decided", f.Redis.Fingerprint, f.SQL.State), nil, execs, f.At)
		case f.Redis.Fingerprint != f.SQL.Fingerprint || !bytes.Equal(f.Redis.Value, f.SQL.Value):
			kc.fs.addUntil(SplitRecord, fmt.Sprintf("Redis holds a completed result (fingerprint %q, %d bytes) that differs from SQL's (fingerprint %q, %d bytes)",
				f.Redis.Fingerprint, len(f.Redis.Value), f.SQL.Fingerprint, len(f.SQL.Value)), nil, execs, f.At)
		}
	}
}

// lastCallKilled reports whether the key's last call never returned
// because its process was killed: only a retry takes such a claim over.
func (kc *keyCheck) lastCallKilled() bool {
	cs := kc.k.calls
	if len(cs) == 0 {
		return false
	}
	last := cs[len(cs)-1]
	return last.Return == 0 && kc.killedAfter(last.Node, last.Invoke)
}

// lastCalls returns the key's last call, for the faults around it.
func (kc *keyCheck) lastCalls() []*Call {
	if n := len(kc.k.calls); n > 0 {
		return kc.k.calls[n-1:]
	}
	return nil
}
