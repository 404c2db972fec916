package idemwatermill_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem/internal/testkit/stacktest"
)

// A delivery whose context ends while its handler runs (Watermill's
// Timeout before the middleware) is answered by its execution: the
// handler's produced messages, not the context's error, so that nothing
// before the middleware can ack the delivery with them unpublished.
func TestDeliveryOutlivesItsContext(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		n := newLedger(t, st).node(t)
		out := message.NewMessage("out-1", []byte("shipped"))
		var c counter
		h := wrap(t, n.store, func(msg *message.Message) ([]*message.Message, error) {
			time.Sleep(200 * time.Millisecond) // past the delivery's context
			return c.handler(out)(msg)
		})
		d := delivery(t, "m-1", "{}")
		ctx, cancel := context.WithTimeout(d.Context(), 20*time.Millisecond)
		defer cancel()
		d.SetContext(ctx)
		got, err := h(d)
		if err != nil || len(got) != 1 || !got[0].Equals(out) {
			t.Fatalf("the delivery whose context ended: %v, %v; want the produced message", got, err)
		}
		if c.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times, want 1", c.runs.Load())
		}
	})
}
