package idemwatermill_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// The worker commits its effect and the processed mark together, then dies
// before it acknowledges (its Store closes under it): the message is
// nacked, and its redelivery, on another instance, is acknowledged without
// a second effect.
func TestCompleteCommitThenWorkerDies(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		a, b := lg.node(t), lg.node(t, tiered.WithLocalCache(0, 0, 0))
		_, err := wrap(t, a.store, func(msg *message.Message) ([]*message.Message, error) {
			if err := lg.effect(msg.Context(), a.sql, msg, "ship", nil); err != nil {
				return nil, err
			}
			go func() { _ = a.store.Close() }() // the worker dies after its commit
			<-msg.Context().Done()
			return nil, nil
		})(delivery(t, "m-1", "{}"))
		if !errors.Is(err, idem.ErrClosed) {
			t.Fatalf("the worker that died: %v, want ErrClosed (no ack)", err)
		}
		var c counter
		for range 3 {
			if out, err := wrap(t, b.store, c.handler())(delivery(t, "m-1", "{}")); err != nil || out != nil {
				t.Fatalf("redelivery: %v, %v; want an ack", out, err)
			}
		}
		if c.runs.Load() != 0 {
			t.Fatal("the redelivery ran the handler again")
		}
		if n := lg.effects(t, "ship")["m-1"]; n != 1 {
			t.Fatalf("%d effects, want 1", n)
		}
	})
}

// A transaction that rolls back after Complete processed nothing: the
// message is nacked (whatever the handler returns), and the redelivery
// runs and commits once.
func TestCompleteRollbackRedelivers(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		n := lg.node(t)
		boom := errors.New("the stock check failed")
		for _, swallow := range []bool{false, true} {
			id := map[bool]string{false: "m-returned", true: "m-swallowed"}[swallow]
			runs := 0
			h := wrap(t, n.store, func(msg *message.Message) ([]*message.Message, error) {
				runs++
				var fail error
				if runs == 1 {
					fail = boom
				}
				err := lg.effect(msg.Context(), n.sql, msg, "ship", fail)
				if swallow {
					return nil, nil // the handler logs its error and returns
				}
				return nil, err
			})
			_, err := h(delivery(t, id, "{}"))
			if want := map[bool]error{false: boom, true: tiered.ErrNotCommitted}[swallow]; !errors.Is(err, want) {
				t.Fatalf("%s: rolled back: %v, want %v", id, err, want)
			}
			if _, err := h(delivery(t, id, "{}")); err != nil {
				t.Fatalf("%s: redelivery: %v", id, err)
			}
			if _, err := h(delivery(t, id, "{}")); err != nil || runs != 2 {
				t.Fatalf("%s: duplicate: %v, runs %d; want an ack after 2 runs", id, err, runs)
			}
			if got := lg.effects(t, "ship")[id]; got != 1 {
				t.Fatalf("%s: %d effects, want 1", id, got)
			}
		}
	})
}

// The messages given to Complete are the run's record: every delivery, the
// first included, returns those, also when the handler returns others.
func TestCompleteProduced(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		n := lg.node(t)
		completed := message.NewMessage("out-1", []byte("shipped"))
		for _, tc := range []struct {
			id       string
			returned []*message.Message
		}{
			{"m-nil", nil},
			{"m-same", []*message.Message{completed}},
			{"m-other", []*message.Message{message.NewMessage("out-2", []byte("other"))}},
		} {
			h := wrap(t, n.store, func(msg *message.Message) ([]*message.Message, error) {
				return tc.returned, lg.effect(msg.Context(), n.sql, msg, "ship", nil, completed)
			}, idemwatermill.WithRepublish(true))
			for i := range 2 {
				out, err := h(delivery(t, tc.id, "{}"))
				if err != nil || len(out) != 1 || !out[0].Equals(completed) {
					t.Fatalf("%s, delivery %d: %v, %v; want the completed message", tc.id, i, out, err)
				}
			}
		}
	})
}

// Complete outside the middleware is a mistake said at the call.
func TestCompleteOutsideTheMiddleware(t *testing.T) {
	lg := newLedger(t, stacktest.Embedded(t))
	n := lg.node(t)
	err := lg.db.RunInTx(t.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		return idemwatermill.Complete(ctx, tx, n.sql)
	})
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Complete without a reservation: %v, want ErrConfig", err)
	}
}
