package idemgrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Completion returns what completes the key with resp: resp as the
// interceptor stores it, for a handler that completes its key inside its
// own database transaction. The handler builds its response, passes
// Completion's bytes to the SQL layer's completion in the same transaction
// as its business rows, commits, and returns resp. Its call and every
// retry then get resp, with the metadata named by WithReplayMetadata that
// the handler set before Completion (what it sets after is not part of the
// answer), even when the server dies or the answer is lost after the
// commit:
//
//	res, _ := idem.ReservationFrom(ctx)
//	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
//		// … the business rows …
//		v, err := idemgrpc.Completion(ctx, resp)
//		if err != nil {
//			return err
//		}
//		return sqlLayer.CompleteReservation(ctx, tx, res, v)
//	})
//	if err != nil {
//		return nil, err // rolled back: the key is released, a retry runs again
//	}
//	return resp, nil
//
// resp must be the message the handler returns, unchanged: the interceptor
// checks it. A handler that, its completion committed, returns a message
// whose encoding differs from resp, or an error, or nil, or that panics,
// gets Internal (reason ReasonFailed) for its call, and the committed resp
// stands for every retry. ctx is the handler's. A nil resp, or a typed nil,
// is an error.
func Completion(ctx context.Context, resp proto.Message) ([]byte, error) {
	if resp == nil || !validMessage(resp) {
		return nil, fmt.Errorf("%w: Completion(%T)", errNotProto, resp)
	}
	var a answer
	if rec, ok := grpc.ServerTransportStreamFromContext(ctx).(*recorder); ok {
		a.header, a.trailer = rec.header.Copy(), rec.trailer.Copy()
	}
	var err error
	if a.response, err = asAny(resp); err != nil {
		return nil, fmt.Errorf("idemgrpc: Completion: %w", err)
	}
	return a.encode()
}
