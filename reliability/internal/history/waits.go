package history

import (
	"fmt"
	"time"
)

// waits is check 11: a call that ran no execution of its own — a replay,
// a duplicate that waited for another owner and got its result, its
// failure or in-flight, a refusal — returns within Options.WaitBound of
// its invoke. The Store bounds a duplicate's wait, in this process as on
// another instance, whatever the owner does: a duplicate that waits for
// the owner's whole work keeps its client far past the wait it was
// configured with. A fault that can slow a tier
// (Options.Slowing), on the call's node or on a shared service, excuses
// the calls it overlapped.
func (kc *keyCheck) waits() {
	if kc.waitBound <= 0 {
		return
	}
	for _, x := range kc.k.calls {
		if x.Exec != "" || x.Return == 0 {
			continue
		}
		took := x.Return - x.Invoke
		if took <= kc.waitBound || kc.slowed(x) {
			continue
		}
		kc.fs.add(OverlongWait, fmt.Sprintf("call %s on %s ended %s after %s, past the wait bound %s, with no fault to slow it",
			x.ID, x.Node, x.Outcome, time.Duration(took), time.Duration(kc.waitBound)), []*Call{x}, nil)
	}
}

// slowed reports whether a fault that can slow a tier overlapped call x:
// one on its node or on a shared service.
func (kc *keyCheck) slowed(x *Call) bool {
	for _, f := range kc.faults { // by start
		if f.Start > x.Return {
			break
		}
		if kc.slowing[f.Kind] && (f.Node == "" || f.Node == x.Node) && orForever(f.End) >= x.Invoke {
			return true
		}
	}
	return false
}
