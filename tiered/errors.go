package tiered

import (
	"errors"
	"fmt"
)

// ErrPending is returned, with fn's value in Result.Value, when fn ran and
// succeeded but the deciding tier has not accepted its result within half
// the lease (an outage). It wraps idem.ErrUnavailable as well: the caller
// has no stored result yet. The Store goes on completing in the background,
// holding the lease, and a retry gets the result once it is stored — or
// runs the work again if the tier refused it (another owner took over after
// the lease and its grace: the one case in which fn can run twice while its
// record lives).
var ErrPending = errors.New("tiered: the work ran; its result is not stored yet")

// ErrNotCommitted is returned, with fn's value in Result.Value (and
// wrapping fn's error, if any), when fn completed its reservation in a
// transaction of its own (sqllayer's CompleteReservation) and that
// transaction did not commit: the record is still in progress under the
// execution's token once fn returned. Nothing is stored; the Store released
// the key, so that a retry runs the work again. The HTTP middleware answers
// it with a 500 problem, not with the response the handler wrote.
//
// It is also returned when the code that runs fn requires the completion
// (the HTTP middleware, the gRPC interceptor, the Watermill middleware) and
// fn took its reservation (idem.ReservationFrom) but returned without
// completing it: its transaction failed before the completion, or it never
// completed.
var ErrNotCommitted = errors.New("tiered: the work completed its reservation in a transaction that did not commit; nothing is stored")

// errUncompleted is what a call whose fn took its reservation to complete
// it in its transaction, and returned without completing, reports.
var errUncompleted = fmt.Errorf("%w: the work took its reservation and returned without completing it (its transaction failed before the completion, or it never completed)", ErrNotCommitted)

// ErrNotReplayable is returned for a key whose work ran once but whose
// result was too large for the deciding tier to keep. The key is completed
// with a marker that says so (in place of the result), so the work never
// runs again for it while the record lives; every caller, the owner
// included, gets this error wrapped with idem.ErrTooLarge (the owner also
// gets the value in Result.Value).
var ErrNotReplayable = errors.New("tiered: result too large to keep; the work ran once and cannot be replayed")

// tooLargeMarker is the value stored in place of a result too large for the
// deciding tier: the work ran once, its result cannot be replayed. It is a
// fixed, improbable byte string: a function that returned these exact bytes
// would have them read as the marker. The bytes name it "tombstone", its
// name when it was first stored; they stay as they are, so that records
// stored then are still read as the marker. (The middleware's tombstone is
// another thing: a response record that says a response was not kept.)
var tooLargeMarker = []byte("\x00idem/tombstone/v1\x00\x9f\x1c\xd2\x47\x8a\x03\xe5\x6b\xbe\x21\x94\x5d\x70\xc8\x0f\x3a")

// isTooLargeMarker reports whether a stored value is tooLargeMarker.
func isTooLargeMarker(v []byte) bool { return string(v) == string(tooLargeMarker) }

// ErrGoexit is what every caller sharing an execution gets when fn called
// runtime.Goexit rather than return (t.FailNow in a function under test, or
// a library that calls it). The execution ends as for an error of fn's:
// renewal stops and the key is released in every tier, so a retry runs fn
// again. The goroutine that ran fn still exits: a caller of Do whose ctx
// cannot be cancelled runs fn on its own goroutine, so its Do never
// returns; every other caller gets ErrGoexit. When fn completed its
// reservation in a transaction that committed before it called Goexit, as
// when it panics after that, the committed result stands and every caller
// gets it, with no error.
var ErrGoexit = errors.New("tiered: fn called runtime.Goexit")

// PanicError is what every caller sharing an execution gets when fn panicked.
// The key was released, so a retry runs fn again. When fn had completed its
// reservation in a transaction that committed before it panicked, there is
// no PanicError: the committed result stands, and every caller gets it with
// no error (the work ran once and its result is stored).
type PanicError struct {
	// Value is what fn passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("tiered: fn panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
