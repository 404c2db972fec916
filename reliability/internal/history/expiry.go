package history

import (
	"fmt"
	"time"
)

// staleReplays is check 10: no caller is replayed a result whose record
// had surely expired before it asked. A record completed with retention r
// expires at its acceptance plus r, by the deciding tier's clock, and its
// acceptance came before the Store reported it (Execution.Completed): so
// a call invoked later than Completed + r + the slack asked after the
// record was gone, and whatever answered it — a local cache, Redis — kept
// the result longer than the record. Once the record is gone the key runs
// again, and two instances then answer one key differently. Only
// executions whose acceptance was recorded are judged, and only keys whose
// retention Options.Retention knows.
func (kc *keyCheck) staleReplays() {
	if kc.retention == nil {
		return
	}
	r := kc.retention(kc.k.key)
	if r <= 0 {
		return
	}
	for _, x := range kc.k.calls {
		e := kc.src[x]
		if x.Outcome != Replayed || e == nil || e.Completion != CompletionAccepted || e.Completed <= 0 {
			continue
		}
		gone := e.Completed + int64(r)
		if x.Invoke <= gone+kc.slack {
			continue
		}
		kc.fs.add(StaleReplay, fmt.Sprintf("call %s on %s, invoked at %s, was replayed the result of execution %s, whose record (accepted by %s, retention %s) had expired by %s at the latest",
			x.ID, x.Node, kc.at(x.Invoke), e.ID, kc.at(e.Completed), time.Duration(r), kc.at(gone)), []*Call{x}, []*Execution{e})
	}
}
