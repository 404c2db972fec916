// Package idemwatermill runs each message a Watermill router delivers once,
// across every consumer instance, over a tiered.Store: the broker's
// redeliveries (a worker that died before its ack, an ack deadline that
// passed, a rebalance) become duplicates that are acknowledged without
// running the handler again.
//
// # The middleware
//
// New returns a message.HandlerMiddleware:
//
//	mw, err := idemwatermill.New(store)
//	router.AddMiddleware(mw)
//
// For each message it derives a key from the message's identity (its UUID
// by default; a metadata field or a fingerprint of the payload by
// WithIdentity) within the consumer's scope (the router handler's name, or
// WithConsumer), then:
//
//   - a new message runs the handler; when the handler returns nil its
//     produced messages are recorded as the key's result and returned, so
//     the router publishes them and acknowledges the message;
//   - a handler error releases the key and is returned: the router nacks
//     the message, the broker redelivers it and the next delivery runs the
//     handler again;
//   - a duplicate of a processed message is acknowledged without running
//     the handler; its recorded produced messages are returned again (the
//     router publishes them once more, under their recorded UUIDs), so
//     that a delivery that ended before they were published, for any
//     reason, loses none (WithRepublish(false) turns that off);
//   - a duplicate while another consumer still runs the message waits for
//     it up to the Store's wait (tiered.WithWait); when that consumer
//     finishes in time it is a processed duplicate, otherwise the message
//     is nacked (after WithNackDelay) and redelivered, never dropped;
//   - when no decision can be made (the deciding tier is down) the message
//     is nacked: the handler never runs without a decision.
//
// Every delivery of a message, the first included, gets its produced
// messages from the one record: what the router publishes is what a
// retry would republish.
//
// The handler receives a copy of the delivered message (UUID, metadata and
// payload) whose context carries the execution: the router, not the
// handler, acknowledges the delivery, from what the middleware returns.
//
// A delivery is answered by its execution even when the delivery's own
// context ends first (Watermill's Timeout before the middleware): the
// handler's context is the execution's, which that Timeout cannot reach,
// and a delivery nacked while its handler went on to complete would leave
// its produced messages to a redelivery. To bound the handler, put the
// Timeout after the middleware. docs/consumers.md has the table of
// Watermill's middlewares before and after this one.
//
// # The handler's transaction
//
// Recording the result after the handler returns leaves a gap: a worker
// killed after its handler's commit and before the record runs the handler
// again on the redelivery. Close it by completing the key inside the
// handler's own transaction with Complete, on a Store whose deciding tier
// is that database's sqllayer.Layer: the business rows and the processed
// mark then commit together, or not at all.
//
//	func(msg *message.Message) ([]*message.Message, error) {
//		err := db.RunInTx(msg.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
//			if _, err := tx.NewInsert().Model(&shipment).Exec(ctx); err != nil {
//				return err
//			}
//			return idemwatermill.Complete(ctx, tx, sqlLayer)
//		})
//		return nil, err
//	}
//
// A handler that calls Complete answers only through a completion that
// committed: one that returns nil after its transaction failed has
// processed nothing, and the message is nacked.
//
// # Watermill's Deduplicator
//
// Repository implements Watermill's middleware.ExpiringKeyRepository over
// a Store, for users who keep Watermill's Deduplicator: its seen-set is
// shared by every instance and survives restarts, and a key is marked seen
// only for a caller told it is first (a call that timed out marks
// nothing). It cannot change the Deduplicator's semantics, which mark a
// message seen before its handler runs and never learn how the handler
// ended: a handler that then fails loses the message. The middleware does
// not have that gap.
package idemwatermill
