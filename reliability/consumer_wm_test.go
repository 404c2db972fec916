//go:build unix

package reliability_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

// wmStack returns the real Redis and sql as one stack: the Stores of a
// test made from it share their keys, as consumer instances do.
func wmStack(t *testing.T, sql *testenv.SQL) *stacktest.Stack {
	t.Helper()
	return stacktest.On(t, sql.Kind, testenv.AnyRedis(t), sql)
}

// wmStore returns a Store over st, with its SQL layer (the deciding tier)
// behind a fault layer the test stalls.
func wmStore(t *testing.T, st *stacktest.Stack) (*tiered.Store, *faultlayer.Layer) {
	t.Helper()
	fl := faultlayer.New(st.SQLLayer(t))
	s, err := tiered.New(tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(fl), tiered.WithTimeouts(2*time.Second, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, fl
}

// stallOnce makes the first call of m on fl answer d late, as a slow
// server does (bounded by the call's context); the later ones are on time.
func stallOnce(fl *faultlayer.Layer, m faultlayer.Method, d time.Duration) *atomic.Int64 {
	var calls atomic.Int64
	fl.Hook(m, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		return nil
	})
	return &calls
}

// runs counts a handler's runs; each run returns what produce returns
// for the run's context and number.
type runs struct{ n atomic.Int64 }

func (r *runs) handler(produce func(ctx context.Context, run int64) ([]*message.Message, error)) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) { return produce(msg.Context(), r.n.Add(1)) }
}

// TestConsumerDeduplicatorStalledTier: Watermill's Deduplicator over
// idemwatermill.Repository, on a router consuming JetStream. The deciding
// tier stalls once (300 ms) past the Deduplicator's Timeout (100 ms): the
// first delivery is nacked, and the message is not taken for seen; a
// redelivery runs the handler, exactly once, and the message ends acked.
func TestConsumerDeduplicatorStalledTier(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, sql *testenv.SQL) {
		r := newWMRig(t, 30*time.Second)
		store, fl := wmStore(t, wmStack(t, sql))
		stallOnce(fl, faultlayer.Reserve, 300*time.Millisecond)
		repo, err := idemwatermill.NewRepository(store, "ship")
		if err != nil {
			t.Fatal(err)
		}
		dedup := &middleware.Deduplicator{
			KeyFactory: func(msg *message.Message) (string, error) { return msg.UUID, nil },
			Repository: repo,
			Timeout:    100 * time.Millisecond,
		}
		var h runs
		r.run(h.handler(func(context.Context, int64) ([]*message.Message, error) { return nil, nil }), dedup.Middleware)
		r.publish(message.NewMessage("m-1", []byte(`{"order":1}`)))
		r.waitDrained()
		deliveries, nacks := r.counts("m-1")
		if n := h.n.Load(); n != 1 {
			t.Fatalf("the handler ran %d times over %d deliveries (%d nacked), want once (0: the message was lost)", n, deliveries, nacks)
		}
		if nacks == 0 {
			t.Fatalf("no delivery was nacked: the stall (%v calls of Reserve) did not outlast the Timeout", fl.Calls(faultlayer.Reserve))
		}
		t.Logf("%d deliveries, %d nacked, one run", deliveries, nacks)
	})
}

// binaryOut is a produced message whose bytes JSON strings would change:
// invalid UTF-8 and binary in metadata values, a binary payload. (Not in a
// metadata key: NATS refuses a header name that is not UTF-8, "could not
// decode headers"; idemwatermill's own tests hold such keys.)
func binaryOut(uuid string) *message.Message {
	m := message.NewMessage(uuid, []byte{0, 0xff, 0xfe, 0x01, '\n'})
	m.Metadata.Set("trace", "\xff\xfe\x00\x01")
	m.Metadata.Set("name", "v\xc3")
	m.Metadata.Set("kind", "shipment")
	return m
}

// TestConsumerProducedBytes: the messages a handler produces reach
// JetStream byte for byte as it made them (UUID, metadata keys and values,
// payload), on the first delivery and on a replay: m-first's delivery
// publishes them; m-replay's first publish fails (the router nacks), and
// its redelivery, a duplicate, publishes them from the record.
func TestConsumerProducedBytes(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, sql *testenv.SQL) {
		r := newWMRig(t, 30*time.Second)
		store, _ := wmStore(t, wmStack(t, sql))
		mw, err := idemwatermill.New(store)
		if err != nil {
			t.Fatal(err)
		}
		var h runs
		r.run(func(msg *message.Message) ([]*message.Message, error) {
			h.n.Add(1)
			return []*message.Message{binaryOut("out-" + msg.UUID)}, nil
		}, mw)
		r.publish(message.NewMessage("m-first", []byte("1")))
		r.waitDrained()
		r.pub.failNext(1)
		r.publish(message.NewMessage("m-replay", []byte("2")))
		r.waitDrained()

		if n := h.n.Load(); n != 2 {
			t.Fatalf("the handler ran %d times for two messages, want 2", n)
		}
		if deliveries, _ := r.counts("m-replay"); deliveries < 2 {
			t.Fatalf("m-replay was delivered %d times: its failed publish was to be redelivered", deliveries)
		}
		want := []*message.Message{binaryOut("out-m-first"), binaryOut("out-m-replay")}
		for what, got := range map[string][]*message.Message{"handed to the publisher": r.pub.published(), "stored by JetStream": r.stored(r.out)} {
			if len(got) != len(want) {
				t.Fatalf("%s: %d messages, want %d (one per message, the replay's included)", what, len(got), len(want))
			}
			for i := range want {
				if diff := sameBytes(got[i], want[i]); diff != "" {
					t.Errorf("%s, message %d: %s", what, i, diff)
				}
			}
		}
	})
}

// errFirst is what a handler's first run returns in the middleware-order
// scenarios that fail it.
var errFirst = errors.New("the warehouse did not answer (first run)")
