package idemwatermill_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// Watermill's Deduplicator over the Repository drops a message seen on
// any instance, and keeps its own semantics: the key is seen before the
// handler runs, so a failed handler's redelivery is dropped too.
func TestRepositoryDeduplicator(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		var _ middleware.ExpiringKeyRepository = (*idemwatermill.Repository)(nil)
		dedup := func(n node) message.HandlerMiddleware {
			d := &middleware.Deduplicator{
				KeyFactory: func(msg *message.Message) (string, error) { return msg.UUID, nil },
				Repository: must.Get(idemwatermill.NewRepository(n.store, "ship"))(t),
				Timeout:    5 * time.Second,
			}
			return d.Middleware
		}
		a, b := lg.node(t), lg.node(t)
		var c counter
		if _, err := dedup(a)(c.handler())(delivery(t, "m-1", "{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := dedup(b)(c.handler())(delivery(t, "m-1", "{}")); err != nil {
			t.Fatal(err)
		}
		if n := c.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times across two instances, want 1", n)
		}
		boom := errors.New("failed")
		if _, err := dedup(a)(func(*message.Message) ([]*message.Message, error) { return nil, boom })(delivery(t, "m-2", "{}")); !errors.Is(err, boom) {
			t.Fatalf("failing handler: %v", err)
		}
		if _, err := dedup(b)(c.handler())(delivery(t, "m-2", "{}")); err != nil || c.runs.Load() != 1 {
			t.Fatalf("redelivery after a failure: %v, runs %d; the Deduplicator drops it (seen before the handler ran)", err, c.runs.Load())
		}
	})
}

// An empty key, a nil Store and a Store that cannot decide are errors.
func TestRepositoryErrors(t *testing.T) {
	if _, err := idemwatermill.NewRepository(nil, "x"); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("nil store: %v", err)
	}
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	r := must.Get(idemwatermill.NewRepository(n.store, "x"))(t)
	if _, err := r.IsDuplicate(t.Context(), ""); !errors.Is(err, idemwatermill.ErrNoIdentity) {
		t.Fatalf("empty key: %v", err)
	}
	_ = n.store.Close()
	if _, err := r.IsDuplicate(t.Context(), "k"); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
}

// The deciding tier stalls once past the Deduplicator's Timeout, on the
// claim or on the mark's record. A stalled claim: IsDuplicate gives up
// with the Timeout's error (the message is nacked) and the key is not
// marked, so a redelivery is new and runs the handler. A stalled record:
// the key was marked for this caller, who waits for the record and is
// told "first". Either way the handler runs exactly once, never zero.
func TestRepositoryStallPastTimeout(t *testing.T) {
	for _, stalled := range []faultlayer.Method{faultlayer.Reserve, faultlayer.Complete} {
		t.Run(stalled.String(), func(t *testing.T) {
			stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
				sql := faultlayer.New(st.SQLLayer(t))
				var stalls atomic.Int64
				sql.Hook(stalled, func(ctx context.Context) error {
					if stalls.Add(1) == 1 {
						select { // the tier answers late, as a slow server does
						case <-time.After(300 * time.Millisecond):
						case <-ctx.Done():
						}
					}
					return nil
				})
				store := must.Get(tiered.New(tiered.WithSQL(sql), tiered.WithTimeouts(2*time.Second, 10*time.Second)))(t)
				t.Cleanup(func() { _ = store.Close() })
				d := &middleware.Deduplicator{
					KeyFactory: func(msg *message.Message) (string, error) { return msg.UUID, nil },
					Repository: must.Get(idemwatermill.NewRepository(store, "ship"))(t),
					Timeout:    100 * time.Millisecond,
				}
				var c counter
				h := d.Middleware(c.handler())
				_, err := h(delivery(t, "m-1", "{}"))
				switch {
				case stalled == faultlayer.Reserve && !errors.Is(err, context.DeadlineExceeded):
					t.Fatalf("the delivery whose claim stalled: %v, want the Timeout's error (a nack)", err)
				case stalled == faultlayer.Complete && err != nil:
					t.Fatalf("the delivery whose record stalled: %v, want it told first", err)
				}
				// A stalled claim ends on its own (released, not marked);
				// until then a redelivery is nacked too. Poll, as a broker
				// redelivers.
				deadline := time.Now().Add(time.Minute)
				for err != nil {
					if time.Now().After(deadline) {
						t.Fatalf("no redelivery acknowledged within a minute: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
					_, err = h(delivery(t, "m-1", "{}"))
				}
				for range 2 { // later deliveries are duplicates
					if _, err := h(delivery(t, "m-1", "{}")); err != nil {
						t.Fatal(err)
					}
				}
				if n := c.runs.Load(); n != 1 {
					t.Fatalf("the handler ran %d times, want 1 (0: the message was lost)", n)
				}
			})
		})
	}
}
