package idemwatermill

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
)

// Complete records, inside the handler's transaction tx, that the message
// ctx belongs to is processed, with produced as the messages it produces:
// the business rows written in tx and the processed mark commit together,
// or not at all. A worker killed after the commit and before its ack then
// causes no second effect: the redelivery is a duplicate.
//
// ctx is the message's context inside the handler (msg.Context(), or one
// derived from it), behind the middleware, on a Store whose deciding tier
// is layer over tx's database. Call it last in the transaction and return
// its error from it, so that the transaction rolls back. The handler then
// returns produced (or nil): the middleware returns the messages that
// committed.
//
// A handler that called Complete and returns without the transaction
// having committed processed nothing: the key is released and the message
// nacked (tiered.ErrNotCommitted), whatever the handler returns. Errors are
// sqllayer.Layer.CompleteReservation's; idem.ErrConfig outside the
// middleware.
func Complete(ctx context.Context, tx sqllayer.Tx, layer *sqllayer.Layer, produced ...*message.Message) error {
	res, ok := idem.ReservationFrom(ctx)
	if !ok {
		return fmt.Errorf("%w: idemwatermill.Complete: no reservation on ctx: call it with the message's context inside a handler behind the middleware", idem.ErrConfig)
	}
	result, err := encode(produced)
	if err != nil {
		return err
	}
	return layer.CompleteReservation(ctx, tx, res, result)
}
