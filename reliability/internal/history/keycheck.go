package history

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

// checkKey runs checks 1 to 11, 13 and 14 on one key, in an order where each uses
// what the earlier ones found.
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
	kc.vanished()
	kc.staleReplays()
	kc.waits()
	kc.releases()
	kc.effects()
	kc.fs.flush()
}
