package tiered

import (
	"context"
	"sync"

	"github.com/idemkit/idem"
)

// flightShards is how many independently locked parts the table of calls in
// flight has: keys spread over them by their digest, which is uniform, so
// that unrelated keys do not queue on one lock.
const flightShards = 16

// flightKey names one execution in this process: a key and a fingerprint.
// Calls with the same key and another fingerprint do not share an execution;
// the tiers tell them apart (a mismatch).
type flightKey struct {
	digest [idem.KeySize]byte
	fp     string
}

// flights is one part of the table of calls in flight. It plays the part
// of singleflight, with one difference that matters here: a caller knows at
// once whether it leads the execution or joins one, so that a caller that
// joins obeys the Store's wait and its own context exactly as a duplicate
// waiting on another instance does (DESIGN: in-process duplicates are
// duplicates too), while the leader waits for its own work.
type flights struct {
	mu    sync.Mutex // guards calls, and the done and cancelWork fields of every call in it
	calls map[flightKey]*call

	_ [40]byte // keep neighbouring parts' locks off one cache line
}

// join returns the call in flight for c's key and fingerprint and false,
// or registers c and returns it and true: the caller then leads c and must
// end it with leave. A caller that leads and waits for c on a channel makes
// c.done before it joins.
func (f *flights) join(c *call) (*call, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.calls[c.flight]; cur != nil {
		if cur.done == nil {
			cur.done = make(chan struct{})
		}
		return cur, false
	}
	if f.calls == nil {
		f.calls = make(map[flightKey]*call)
	}
	f.calls[c.flight] = c
	return c, true
}

// setWork records the cancel of c's work, which c leads, for Close.
func (f *flights) setWork(c *call, cancel context.CancelCauseFunc) {
	f.mu.Lock()
	c.cancelWork = cancel
	f.mu.Unlock()
}

// cancelWork cancels with cause the work of every call in f that began it.
func (f *flights) cancelWork(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c.cancelWork != nil {
			c.cancelWork(cause)
		}
	}
}

// leave ends c, whose outcome is set: later callers start a new execution,
// and those waiting for c get its outcome.
func (f *flights) leave(c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, c.flight)
	if c.done != nil {
		close(c.done)
	}
}
