package tiered

import (
	"context"
	"encoding/binary"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/flight"
)

// flights is the Store's table of the calls in flight in this process. It
// plays the part of singleflight, with one difference that matters here: a
// caller knows at once whether it leads the execution or joins one, so that
// a caller that joins obeys the Store's wait and its own context exactly as
// a duplicate waiting on another instance does (DESIGN: in-process
// duplicates are duplicates too), while the leader waits for its own work.
//
// One execution is named by a key and a fingerprint: calls with the same
// key and another fingerprint do not share an execution (the tiers tell
// them apart: a mismatch).
type flights struct {
	calls flight.Table[flightKey, *call]
}

// flightKey names one execution in flight.
type flightKey struct {
	digest      [idem.KeySize]byte
	fingerprint string
}

// flightHash is the hash of a key in the table: eight bytes of its digest,
// which is uniform already, so that a lookup hashes a word rather than the
// digest and the fingerprint.
func flightHash(d *[idem.KeySize]byte) uint64 { return binary.LittleEndian.Uint64(d[8:16]) }

// join returns the call in flight for c's key and fingerprint and false,
// or registers c and returns it and true: the caller then leads c and must
// end it with leave. A caller that leads and waits for c on a channel
// (watch) has c.flight.Done made before it joins.
func (f *flights) join(c *call, watch bool) (*call, bool) {
	d := c.key.Digest()
	c.flight = flight.Call[flightKey, *call]{Key: flightKey{d, c.fingerprint}, Hash: flightHash(&d), Value: c}
	if watch {
		c.flight.Watch()
	}
	cur, lead := f.calls.Join(&c.flight)
	return cur.Value, lead
}

// setWork records the cancel of c's work, which c leads, for Close.
func (f *flights) setWork(c *call, cancel context.CancelCauseFunc) {
	f.calls.SetCancel(&c.flight, cancel)
}

// cancelWork cancels with cause the work of every call in flight that
// began it.
func (f *flights) cancelWork(cause error) { f.calls.CancelAll(cause) }

// leave ends c, whose outcome is set: later callers start a new execution,
// and those waiting for c get its outcome.
func (f *flights) leave(c *call) { f.calls.Leave(&c.flight) }
