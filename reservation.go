package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/reservation"
)

// Reservation is the claim that the execution running in a context holds on
// its key: the key, the owner token the deciding tier minted for it, and
// whether it took over a lapsed claim of an earlier owner. A tiered.Store
// puts it on the context of every execution it leads once a deciding tier
// claimed the key (never on work run without a decision under
// WithFailOpen), so that the function the Store runs — an HTTP handler
// behind the middleware, a queue consumer's function — reads it with
// [ReservationFrom].
//
// Its main use is completing the key in the function's own database
// transaction, so that idem's record and the business rows commit together:
// sqllayer's CompleteReservation. Behind the HTTP middleware and the gRPC
// interceptor, taking it says the handler completes it that way (see
// ReservationFrom). A handler that only needs its key — to derive an
// idempotency key for a downstream service (Key().Hex()) — reads it with
// KeyFrom, which takes nothing.
//
// A Reservation is safe for concurrent use. It ends when the function
// returns: a completion attempted later is refused.
type Reservation struct {
	key       Key
	fp        string
	token     string
	tookOver  bool
	retention time.Duration
	layer     Layer

	// state is what the function does with the reservation: the protocol
	// between the code that runs the execution and the layer that
	// completes it in a transaction, which users do not take part in
	// (package internal/reservation).
	state reservation.State

	// node is the context the reservation is placed on: putting a Store's
	// reservation on its execution's context allocates nothing more.
	node reservationCtx
}

func init() {
	reservation.Link(ErrConfig, newReservationContext, stateOf, unwrap)
}

// newReservationContext makes the reservation of an execution whose
// deciding layer claimed the key with rec, and returns ctx carrying it: see
// reservation.NewContext.
func newReservationContext(ctx context.Context, layer any, rec Record, retention time.Duration) (context.Context, *reservation.State) {
	var l Layer
	if layer != nil {
		l = layer.(Layer)
	}
	r := &Reservation{key: rec.Key, fp: rec.Fingerprint, token: rec.Token, tookOver: rec.TookOver, retention: retention, layer: l}
	r.node = reservationCtx{Context: ctx, r: r}
	return &r.node, &r.state
}

// stateOf returns the state of res, an *Reservation, and the layer that
// holds it; nil, nil for a nil reservation.
func stateOf(res any) (*reservation.State, any) {
	r, _ := res.(*Reservation)
	if r == nil {
		return nil, nil
	}
	return &r.state, r.layer
}

// unwrap returns the layer that layer wraps, when it says so through an
// Unwrap() Layer method.
func unwrap(layer any) (any, bool) {
	u, ok := layer.(interface{ Unwrap() Layer })
	if !ok {
		return nil, false
	}
	return u.Unwrap(), true
}

// Key returns the reserved key.
func (r *Reservation) Key() Key { return r.key }

// Fingerprint returns the fingerprint the key was claimed for.
func (r *Reservation) Fingerprint() string { return r.fp }

// Token returns the owner token of the claim: every change to the record
// is a compare-and-set on it.
func (r *Reservation) Token() string { return r.token }

// TookOver reports whether this execution claimed the key by taking over
// the lapsed claim of an earlier owner, whose work may have begun (and done
// things outside the database) before it stopped. A layer that cannot tell
// (Redis) reports false.
func (r *Reservation) TookOver() bool { return r.tookOver }

// Retention returns how long the completed record is kept.
func (r *Reservation) Retention() time.Duration { return r.retention }

// Layer returns the deciding layer that holds the claim.
func (r *Reservation) Layer() Layer { return r.layer }

// RequireCompletion is for the code that runs an execution and answers for
// it — an adapter such as idemgrpc's interceptor or idemwatermill's
// middleware — where the function's return is not by itself an answer.
// Once it is called, a function that takes the reservation with
// ReservationFrom commits its result only by completing it in its
// transaction (sqllayer's CompleteReservation): one that returns without a
// completion that committed has committed nothing, whatever it wrote, and
// the Store keeps nothing, releases the key so that a retry runs again,
// and reports tiered.ErrNotCommitted. A function that never takes the
// reservation is unaffected. Call it before the function runs.
func (r *Reservation) RequireCompletion() { r.state.RequireCompletion() }

// reservationKey is the context key of a reservation.
type reservationKey struct{}

// reservationCtx is a context that carries a reservation, as
// context.WithValue makes one, but kept in the reservation itself.
// Everything but the reservation's value is its parent's: Done, Err,
// Deadline, and the values the context package looks up to link a
// child's cancellation to its parent's and to find its cause.
type reservationCtx struct {
	context.Context
	r *Reservation
}

func (c *reservationCtx) Value(key any) any {
	if key == any(reservationKey{}) {
		return c.r
	}
	return c.Context.Value(key)
}

func (c *reservationCtx) String() string {
	return fmt.Sprint(c.Context) + ".WithValue(idem.Reservation)"
}

// ReservationFrom returns the reservation of the execution ctx belongs to:
// the context a tiered.Store gives its function (the request context of a
// handler behind the middleware, in every adapter), or one derived from it.
// ok is false outside an execution, and for work run without a decision
// under WithFailOpen.
//
// Behind the HTTP middleware, the gRPC interceptor and the Watermill
// middleware, taking the reservation says that the handler completes it in
// its transaction (sqllayer's CompleteReservation): a handler that took it
// and returns without a completion that committed has committed nothing,
// whatever it wrote — the key is released, the caller hears
// tiered.ErrNotCommitted (HTTP: a 500 problem; gRPC: Internal), and the
// retry runs. Elsewhere (a Store's Do or Once function) taking it changes
// nothing: what the function returns is stored unless it completed in its
// transaction.
func ReservationFrom(ctx context.Context) (r *Reservation, ok bool) {
	r, ok = ctx.Value(reservationKey{}).(*Reservation)
	if !ok || r == nil {
		return nil, false
	}
	r.state.Take()
	return r, true
}

// KeyFrom returns the key of the execution ctx belongs to, as
// ReservationFrom's reservation holds it, without taking the reservation:
// a handler behind the HTTP middleware or the gRPC interceptor that reads
// it still answers as usual (its response is stored when it returns).
// Derive a downstream service's idempotency key from it (Key().Hex()), so
// that a retry of the work after a lost lease repeats no side effect there.
// ok is false outside an execution, and for work run without a decision
// under WithFailOpen.
func KeyFrom(ctx context.Context) (k Key, ok bool) {
	r, ok := ctx.Value(reservationKey{}).(*Reservation)
	if !ok || r == nil {
		return Key{}, false
	}
	return r.key, true
}
