package history

import (
	"bytes"
	"fmt"
)

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
	for _, e := range kc.k.execs {
		nr = nr || (e.Tombstone && !e.Failed && e.End != 0) // its first caller got it; the record holds a marker
	}
	// A completed record holds a real result of this key and fingerprint
	// (a key finalised as not replayable holds a marker instead, and
	// what its first caller was told is not in it).
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
		case len(values) > 0 && !nr && !values[string(f.SQL.Value)]:
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
