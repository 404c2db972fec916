package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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

	mu      sync.Mutex
	ended   bool                   // the function returned
	produce func() ([]byte, error) // the result function, or nil
	inTx    bool                   // a layer wrote the completion in the caller's transaction
	written [][]byte               // every result it wrote, in order
	refused error                  // a completion refused as a mistake (ErrConfig), or nil

	// guarded is set by RequireCompletion; taken once ReservationFrom gave
	// the reservation out after that.
	guarded atomic.Bool
	taken   atomic.Bool

	// node is the context ContextWithReservation returns the first time it
	// is given this reservation, which placed records: putting a Store's
	// reservation on its execution's context allocates nothing more.
	node   reservationCtx
	placed atomic.Bool
}

// NewReservation is for Stores: it returns the reservation of an execution
// whose deciding layer claimed the key with rec (Key, Fingerprint, Token and
// TookOver are read from it) and keeps results for retention, and the
// handle by which the Store reads and ends it.
func NewReservation(layer Layer, rec Record, retention time.Duration) (*Reservation, ReservationOwner) {
	r := &Reservation{key: rec.Key, fp: rec.Fingerprint, token: rec.Token, tookOver: rec.TookOver, retention: retention, layer: layer}
	return r, ReservationOwner{r: r}
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

// SetResultFunc is for the code that runs the execution and knows how to
// encode its result (the HTTP middleware encodes the response the handler
// wrote): a completion in a transaction given no result of its own stores
// what f returns. f is called at most once per completion attempt, on the
// goroutine that completes. A second SetResultFunc is refused (idem.ErrConfig):
// the result is that code's to define.
func (r *Reservation) SetResultFunc(f func() ([]byte, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.produce != nil {
		return fmt.Errorf("%w: the reservation's result is already defined by the code that runs the execution", ErrConfig)
	}
	r.produce = f
	return nil
}

// RequireCompletion is for the code that runs the execution and answers
// for it (the HTTP middleware, the gRPC interceptor), where returning is
// not by itself an answer: a function that takes the reservation with
// ReservationFrom from now on commits its result only by completing it in
// its transaction. When such a function returns without a completion that
// committed (its transaction failed before completing, or it never
// completed), it has committed nothing, whatever it wrote: the Store keeps
// nothing, releases the key so that a retry runs again, and reports
// tiered.ErrNotCommitted. A function that never takes the reservation is
// unaffected.
func (r *Reservation) RequireCompletion() { r.guarded.Store(true) }

// CompleteWith is for layers that complete a reservation inside a caller's
// transaction. It checks that the reservation is held by layer (a layer
// that wraps another and returns it from an Unwrap() Layer method counts as
// the one it wraps) and that its execution is still running; decides the
// result (result, or when it is nil the result function's, see
// SetResultFunc; a result given where a result function defines it is
// refused); records that the completion is now the caller's transaction's
// to commit; and calls write with the result. From then on the Store does
// not complete the key itself: once the function returns, it reads what
// committed.
//
// A nil reservation, one of another layer, and one whose execution ended
// give an error wrapping ErrConfig; so does a result given beside a result
// function. The result function's own error is returned as it is.
func (r *Reservation) CompleteWith(layer Layer, result []byte, write func(result []byte) error) error {
	if r == nil {
		return fmt.Errorf("%w: no reservation: complete in the function a tiered.Store runs (a handler behind the middleware, a Do or Once function), with the reservation idem.ReservationFrom(ctx) returns there", ErrConfig)
	}
	if !holds(r.layer, layer) {
		return r.refuse(fmt.Errorf("%w: the reservation is held by the Store's deciding tier (%T), not by this layer: completing in a transaction needs a Store whose deciding tier is this layer (tiered.WithSQL with it)", ErrConfig, r.layer))
	}
	result, err := r.decide(result)
	if err != nil {
		if errors.Is(err, ErrConfig) {
			return r.refuse(err)
		}
		return err
	}
	return write(result)
}

// refuse records a completion refused as a mistake and returns err. The
// Store then keeps nothing of the execution: the function meant its result
// to commit with its transaction, which cannot have happened.
func (r *Reservation) refuse(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil && !r.ended {
		r.refused = err
	}
	return err
}

// decide returns the result a completion in a transaction stores and
// records the attempt, unless the execution has ended. The result function
// runs under r.mu, so that it never runs once End has returned (the code
// that defined it may have moved on).
func (r *Reservation) decide(result []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ended:
		return nil, fmt.Errorf("%w: the reservation's execution has ended: complete before the function returns", ErrConfig)
	case result != nil && r.produce != nil:
		return nil, fmt.Errorf("%w: the result of this execution is defined by the code that runs it (behind the HTTP middleware, the response written so far): pass a nil result", ErrConfig)
	case r.produce != nil:
		var err error
		if result, err = r.produce(); err != nil {
			return nil, err
		}
	case result == nil:
		result = []byte{}
	default:
		result = append([]byte{}, result...) // the caller may reuse its slice
	}
	r.inTx = true
	if !(Ending{Written: r.written}).Wrote(result) {
		r.written = append(r.written, result)
	}
	return result, nil
}

// holds reports whether layer is held, or wraps through Unwrap, the layer
// want.
func holds(held, want Layer) bool {
	for l := held; l != nil; {
		if l == want {
			return true
		}
		u, ok := l.(interface{ Unwrap() Layer })
		if !ok {
			return false
		}
		l = u.Unwrap()
	}
	return false
}

// ReservationOwner is a Store's handle on a reservation it made.
type ReservationOwner struct{ r *Reservation }

// Ending is what the function of an execution did with its reservation,
// as ReservationOwner.End and InTx report it.
type Ending struct {
	// InTx: a layer wrote a completion in a caller's transaction
	// (CompleteWith). The Store then reads what committed.
	InTx bool
	// Written holds every result such a completion wrote, in order (one,
	// unless the function completed again, in a new transaction after the
	// first rolled back, say). What committed, if anything, is one of them.
	Written [][]byte
	// Refused is the first completion CompleteWith refused as a mistake
	// (wrapping ErrConfig): the function then meant its result to commit in
	// a transaction that could not hold it, so the Store should keep
	// nothing.
	Refused error
	// Uncompleted: the reservation was guarded (RequireCompletion), the
	// function took it (ReservationFrom) and never wrote a completion. It
	// has committed nothing: the Store should keep nothing.
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
func (o ReservationOwner) InTx() Ending {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	return o.r.ending()
}

// End ends the reservation when its function has returned: a completion
// attempted afterwards is refused. It returns what the function did with
// the reservation.
func (o ReservationOwner) End() Ending {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.ended = true
	return o.r.ending()
}

// ending reports what the function did with r. r.mu is held.
func (r *Reservation) ending() Ending {
	return Ending{InTx: r.inTx, Written: r.written, Refused: r.refused,
		Uncompleted: !r.inTx && r.guarded.Load() && r.taken.Load()}
}

// reservationKey is the context key of ContextWithReservation.
type reservationKey struct{}

// ContextWithReservation returns ctx carrying r: a Store puts the
// reservation on the context of the execution it leads.
func ContextWithReservation(ctx context.Context, r *Reservation) context.Context {
	if ctx != nil && r != nil && r.placed.CompareAndSwap(false, true) {
		r.node = reservationCtx{Context: ctx, r: r}
		return &r.node
	}
	return context.WithValue(ctx, reservationKey{}, r)
}

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
// Behind the HTTP middleware and the gRPC interceptor, taking the
// reservation says that the handler completes it in its transaction
// (sqllayer's CompleteReservation): a handler that took it and returns
// without a completion that committed has committed nothing, whatever it
// wrote — the key is released, the client gets a 500 problem (gRPC:
// Internal), and the retry runs. See RequireCompletion.
func ReservationFrom(ctx context.Context) (r *Reservation, ok bool) {
	r, ok = ctx.Value(reservationKey{}).(*Reservation)
	if !ok || r == nil {
		return nil, false
	}
	if r.guarded.Load() && !r.taken.Load() {
		r.taken.Store(true)
	}
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
