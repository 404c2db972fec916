package sqllayer

import (
	"context"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
)

// CompleteReservation completes, inside the caller's transaction tx, the
// key that res reserves for the execution running now: the function a
// tiered.Store runs, such as a handler behind the middleware, whose context
// gives res through idem.ReservationFrom. idem's record and the business rows
// then commit together, or not at all: a crash, a cut connection or a lost
// response after the commit cannot make a retry run the work again, and a
// rollback leaves no result behind.
//
// The result stored is result; behind the HTTP middleware it is the
// response the handler wrote so far, and result must be nil: the response
// is frozen (further writes fail with middleware.ErrResponseFrozen), so
// write the response first and complete last, just before the commit.
// Like CompleteTx it is a compare-and-set on the reservation's token; the
// row stays locked until tx ends.
//
// Once it is called the Store no longer completes the key itself: when the
// function returns, the Store reads what committed. Completed with this
// result: every caller, the retries on any instance included, gets it. Still
// in progress: the transaction did not commit, the key is released, and
// the caller hears tiered.ErrNotCommitted (a 500 problem behind the
// middleware), so that a retry runs the work again. Commit or roll back tx
// before the function returns.
//
// Errors: idem.ErrConfig when res is nil (called outside an execution, or
// with a reservation ReservationFrom did not give), when it is held by
// another tier (a Store without this layer as its deciding tier: Redis
// only, memlayer), when its execution has ended, or when a result is given
// behind the middleware; idem.ErrLeaseLost when the token no longer owns
// the record; idem.ErrTooLarge; ErrConflict for a deadlock or serialization
// failure (run the transaction again: a new attempt completes again); the
// middleware's error when the response cannot be stored (ErrNotKept for a
// status its policy does not keep). Return the error from the transaction,
// so that it rolls back.
//
// Under a tiered.Store made WithAtomic the Store completes the key itself,
// in the transaction that TxFrom returns: a completion of the function's is
// refused (idem.ErrConfig) before it reaches the database, and the
// execution keeps nothing.
func (l *Layer) CompleteReservation(ctx context.Context, tx Tx, res *idem.Reservation, result []byte) error {
	if res != nil {
		if a := l.atomicFor(res.Token()); a != nil {
			return a.refuse()
		}
	}
	return reservation.CompleteWith(res, l, result, func(result []byte) error {
		return l.CompleteTx(ctx, tx, res.Key(), res.Token(), result, res.Retention())
	})
}
