package idemwatermill_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
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
