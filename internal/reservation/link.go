package reservation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// link holds what package idem gives as it initializes (see Link). It is
// written once, before any package that imports idem runs, and only read
// afterwards.
var link struct {
	errConfig error
	// newContext is a func(context.Context, any, R, time.Duration)
	// (context.Context, *State), R idem's Record.
	newContext any
	stateOf    func(res any) (st *State, held any)
	unwrap     func(layer any) (inner any, ok bool)
}

// Link is for package idem, once, as it initializes, and for nothing else.
// It gives this package:
//
//   - errConfig, idem.ErrConfig, which the refusals here wrap;
//   - newContext, which makes the reservation of an execution whose
//     deciding layer claimed the key with a record, and returns a context
//     carrying it and its State (see NewContext);
//   - stateOf, which returns the State of res, an *idem.Reservation, and
//     the layer that holds it (nil, nil for a nil reservation);
//   - unwrap, which returns the layer that layer (an idem.Layer) wraps,
//     when it has an Unwrap() idem.Layer method.
func Link[R any](errConfig error, newContext func(ctx context.Context, layer any, rec R, retention time.Duration) (context.Context, *State),
	stateOf func(res any) (*State, any), unwrap func(layer any) (any, bool)) {
	link.errConfig, link.newContext, link.stateOf, link.unwrap = errConfig, newContext, stateOf, unwrap
}

// NewContext is for Stores: it makes the reservation of an execution whose
// deciding layer (an idem.Layer) claimed the key with rec (an idem.Record:
// Key, Fingerprint, Token and TookOver are read from it) and keeps results
// for retention. It returns ctx carrying it, where idem.ReservationFrom
// finds it (and on every context derived from it), and its State, by which
// the Store reads and ends it.
//
// rec goes to idem as it is, typed, so that a record is not converted to
// an interface (and allocated) on every execution; a rec of another type
// than idem.Record panics, and so does a layer that is no idem.Layer.
func NewContext[R any](ctx context.Context, layer any, rec R, retention time.Duration) (context.Context, *State) {
	return link.newContext.(func(context.Context, any, R, time.Duration) (context.Context, *State))(ctx, layer, rec, retention)
}

// Of returns the State of res, an *idem.Reservation, or nil when res is
// nil: for the code that runs an execution and reads its reservation with
// idem.ReservationFrom, to set its result function or require its
// completion.
func Of(res any) *State {
	st, _ := link.stateOf(res)
	return st
}

// CompleteWith is for layers that complete a reservation inside a caller's
// transaction: res is the *idem.Reservation the caller gave, layer the
// completing layer (an idem.Layer). It checks that the reservation is held
// by layer (a layer that wraps another and returns it from an Unwrap()
// idem.Layer method counts as the one it wraps) and that its execution is
// still running; decides the result (result, or when it is nil the result
// function's, see State.SetResultFunc; a result given where a result
// function defines it is refused); records that the completion is now the
// caller's transaction's to commit; and calls write with the result. From
// then on the Store does not complete the key itself: once the function
// returns, it reads what committed.
//
// A nil reservation, one of another layer, and one whose execution ended
// give an error wrapping idem.ErrConfig; so does a result given beside a
// result function. The result function's own error is returned as it is.
func CompleteWith(res, layer any, result []byte, write func(result []byte) error) error {
	st, held := link.stateOf(res)
	if st == nil {
		return fmt.Errorf("%w: no reservation: complete in the function a tiered.Store runs (a handler behind the middleware, a Do or Once function), with the reservation idem.ReservationFrom(ctx) returns there", link.errConfig)
	}
	if !holds(held, layer) {
		return st.refuse(fmt.Errorf("%w: the reservation is held by the Store's deciding tier (%T), not by this layer: completing in a transaction needs a Store whose deciding tier is this layer (tiered.WithSQL with it)", link.errConfig, held))
	}
	result, err := st.decide(result)
	if err != nil {
		if errors.Is(err, link.errConfig) {
			return st.refuse(err)
		}
		return err
	}
	return write(result)
}

// holds reports whether held is the layer want, or wraps it through
// Unwrap.
func holds(held, want any) bool {
	for l := held; l != nil; {
		if l == want {
			return true
		}
		var ok bool
		if l, ok = link.unwrap(l); !ok {
			return false
		}
	}
	return false
}
