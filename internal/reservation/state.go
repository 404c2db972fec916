package reservation

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// State is what the function of one execution did with its reservation:
// the side of an idem.Reservation that the code running the execution and
// the layer completing it in a transaction share, and users never see.
// [NewContext] returns it to the Store that made the reservation, [Of]
// finds it from the reservation itself. Its methods are safe for concurrent
// use.
type State struct {
	mu      sync.Mutex
	ended   bool                   // the function returned
	produce func() ([]byte, error) // the result function, or nil
	inTx    bool                   // a layer wrote the completion in the caller's transaction
	written [][]byte               // every result it wrote, in order
	refused error                  // a completion refused as a mistake (ErrConfig), or nil

	// guarded is set by RequireCompletion; taken once idem.ReservationFrom
	// gave the reservation out after that.
	guarded atomic.Bool
	taken   atomic.Bool
}

// SetResultFunc is for the code that runs the execution and knows how to
// encode its result (the HTTP middleware encodes the response the handler
// wrote): a completion in a transaction given no result of its own stores
// what f returns. f is called at most once per completion attempt, on the
// goroutine that completes. A second SetResultFunc is refused
// (idem.ErrConfig): the result is that code's to define.
func (s *State) SetResultFunc(f func() ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.produce != nil {
		return fmt.Errorf("%w: the reservation's result is already defined by the code that runs the execution", link.errConfig)
	}
	s.produce = f
	return nil
}

// RequireCompletion is for the code that runs the execution and answers
// for it (the HTTP middleware, the gRPC interceptor, the Watermill
// middleware), where returning is not by itself an answer: a function that
// takes the reservation with idem.ReservationFrom from now on commits its
// result only by completing it in its transaction. When such a function
// returns without a completion that committed (its transaction failed
// before completing, or it never completed), it has committed nothing,
// whatever it wrote: [State.End] reports it Uncompleted, and the Store keeps
// nothing, releases the key so that a retry runs again, and reports
// tiered.ErrNotCommitted. A function that never takes the reservation (or
// reads only its key, with idem.KeyFrom) is unaffected.
func (s *State) RequireCompletion() { s.guarded.Store(true) }

// Take is for idem.ReservationFrom, which gives the reservation out: after
// RequireCompletion, the function that took it must complete it.
func (s *State) Take() {
	if s.guarded.Load() && !s.taken.Load() {
		s.taken.Store(true)
	}
}

// Ending is what the function of an execution did with its reservation,
// as [State.End] and [State.InTx] report it.
type Ending struct {
	// InTx: a layer wrote a completion in a caller's transaction
	// (CompleteWith). The Store then reads what committed.
	InTx bool
	// Written holds every result such a completion wrote, in order (one,
	// unless the function completed again, in a new transaction after the
	// first rolled back, say). What committed, if anything, is one of them.
	Written [][]byte
	// Refused is the first completion CompleteWith refused as a mistake
	// (wrapping idem.ErrConfig): the function then meant its result to
	// commit in a transaction that could not hold it, so the Store should
	// keep nothing.
	Refused error
	// Uncompleted: the reservation was guarded (RequireCompletion), the
	// function took it (idem.ReservationFrom) and never wrote a completion.
	// It has committed nothing: the Store should keep nothing.
	Uncompleted bool
}

// Wrote reports whether result is one of the results written.
func (e Ending) Wrote(result []byte) bool {
	for _, w := range e.Written {
		if string(w) == string(result) {
			return true
		}
	}
	return false
}

// InTx reports what the function did with the reservation so far.
func (s *State) InTx() Ending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ending()
}

// End ends the reservation when its function has returned: a completion
// attempted afterwards is refused. It returns what the function did with
// the reservation.
func (s *State) End() Ending {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.ending()
}

// ending reports what the function did with the reservation. s.mu is held.
func (s *State) ending() Ending {
	return Ending{InTx: s.inTx, Written: s.written, Refused: s.refused,
		Uncompleted: !s.inTx && s.guarded.Load() && s.taken.Load()}
}

// refuse records a completion refused as a mistake and returns err. The
// Store then keeps nothing of the execution: the function meant its result
// to commit with its transaction, which cannot have happened.
func (s *State) refuse(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil && !s.ended {
		s.refused = err
	}
	return err
}

// decide returns the result a completion in a transaction stores and
// records the attempt, unless the execution has ended. The result function
// runs under s.mu, so that it never runs once End has returned (the code
// that defined it may have moved on).
func (s *State) decide(result []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
		return nil, fmt.Errorf("%w: the reservation's execution has ended: complete before the function returns", link.errConfig)
	case result != nil && s.produce != nil:
		return nil, fmt.Errorf("%w: the result of this execution is defined by the code that runs it (behind the HTTP middleware, the response written so far): pass a nil result", link.errConfig)
	case s.produce != nil:
		var err error
		if result, err = s.produce(); err != nil {
			return nil, err
		}
	case result == nil:
		result = []byte{}
	default:
		result = append([]byte{}, result...) // the caller may reuse its slice
	}
	s.inTx = true
	if !(Ending{Written: s.written}).Wrote(result) {
		s.written = append(s.written, result)
	}
	return result, nil
}
