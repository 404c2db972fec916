package tiered

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/idemkit/idem"
)

// flightShards is how many independently locked parts the table of calls in
// flight has: keys spread over them by their digest, which is uniform, so
// that unrelated keys do not queue on one lock.
const flightShards = 16

// flights is one part of the table of calls in flight. It plays the part
// of singleflight, with one difference that matters here: a caller knows at
// once whether it leads the execution or joins one, so that a caller that
// joins obeys the Store's wait and its own context exactly as a duplicate
// waiting on another instance does (DESIGN: in-process duplicates are
// duplicates too), while the leader waits for its own work.
//
// One execution is named by a key and a fingerprint: calls with the same
// key and another fingerprint do not share an execution (the tiers tell
// them apart: a mismatch). calls is indexed by eight bytes of the key's
// digest, which is uniform already, so that a lookup hashes a word rather
// than the digest and the fingerprint; the calls whose digests share them
// (the same key with other fingerprints, or another key that shares those
// bytes) are chained through sameSlot.
type flights struct {
	mu    sync.Mutex // guards calls, and the sameSlot, done and cancelWork fields of every call in it
	calls map[uint64]*call

	_ [40]byte // keep neighbouring parts' locks off one cache line
}

// flightSlot returns the slot of key in a part of the table (the part is
// chosen by the digest's first byte).
func flightSlot(key idem.Key) uint64 {
	d := key.Digest()
	return binary.LittleEndian.Uint64(d[8:16])
}

// find returns the first call in slot, and the call in flight for key and
// fingerprint fp, or nil. f.mu must be held.
func (f *flights) find(slot uint64, key idem.Key, fp string) (head, c *call) {
	head = f.calls[slot]
	for c = head; c != nil; c = c.sameSlot {
		if c.key.Equal(key) && c.fingerprint == fp {
			return head, c
		}
	}
	return head, nil
}

// join returns the call in flight for c's key and fingerprint and false,
// or registers c and returns it and true: the caller then leads c and must
// end it with leave. A caller that leads and waits for c on a channel makes
// c.done before it joins.
func (f *flights) join(c *call) (*call, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	slot := flightSlot(c.key)
	head, cur := f.find(slot, c.key, c.fingerprint)
	if cur != nil {
		if cur.done == nil {
			cur.done = make(chan struct{})
		}
		return cur, false
	}
	if f.calls == nil {
		f.calls = make(map[uint64]*call)
	}
	c.sameSlot = head
	f.calls[slot] = c
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
	for _, head := range f.calls {
		for c := head; c != nil; c = c.sameSlot {
			if c.cancelWork != nil {
				c.cancelWork(cause)
			}
		}
	}
}

// leave ends c, whose outcome is set: later callers start a new execution,
// and those waiting for c get its outcome.
func (f *flights) leave(c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	slot := flightSlot(c.key)
	switch head := f.calls[slot]; {
	case head == c && c.sameSlot == nil:
		delete(f.calls, slot)
	case head == c:
		f.calls[slot] = c.sameSlot
	default:
		prev := head
		for prev.sameSlot != c {
			prev = prev.sameSlot
		}
		prev.sameSlot = c.sameSlot
	}
	c.sameSlot = nil
	if c.done != nil {
		close(c.done)
	}
}
