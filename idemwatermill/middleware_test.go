package idemwatermill_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// Three consumer instances, each a router with two handlers on one topic,
// each with a Store of its own on one Redis and one database. Every message
// reaches every instance twice (the broker's redelivery), and a third of
// the first attempts fail. Each handler's effect happens once per message,
// and every delivery is acknowledged in the end.
func TestEachMessageOnceAcrossConsumers(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		pubsub := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 64}, logger)
		t.Cleanup(func() { _ = pubsub.Close() })
		a := newAcks()
		var auditMu sync.Mutex
		audited := map[string]int{}
		for i := range 3 {
			n := lg.node(t)
			mw := must.Get(idemwatermill.New(n.store))(t) // scope: the router handler's name
			r := must.Get(message.NewRouter(message.RouterConfig{}, logger))(t)
			r.AddMiddleware(a.middleware, mw)
			failed := map[string]bool{}
			var failMu sync.Mutex
			r.AddConsumerHandler("ship", "orders", pubsub, func(msg *message.Message) error {
				failMu.Lock()
				fail := !failed[msg.UUID] && rand.IntN(3) == 0
				failed[msg.UUID] = true
				failMu.Unlock()
				if fail {
					return fmt.Errorf("instance %d: the warehouse did not answer", i)
				}
				return lg.effect(msg.Context(), n.sql, msg, "ship", nil)
			})
			r.AddConsumerHandler("audit", "orders", pubsub, func(msg *message.Message) error {
				auditMu.Lock()
				audited[msg.UUID]++
				auditMu.Unlock()
				return nil
			})
			runRouter(t, r)
		}
		const messages = 40
		uuids := make([]string, messages)
		for i := range uuids {
			uuids[i] = watermill.NewUUID()
			msg := message.NewMessage(uuids[i], []byte(fmt.Sprintf(`{"order":%d}`, i)))
			for range 2 { // delivered, then redelivered
				if err := pubsub.Publish("orders", msg.Copy()); err != nil {
					t.Fatal(err)
				}
			}
		}
		waitFor(t, "every delivery acknowledged", func() bool {
			for _, id := range uuids {
				if a.count("ship", id) != 6 || a.count("audit", id) != 6 {
					return false
				}
			}
			return true
		}, func() string { return a.short([]string{"ship", "audit"}, uuids, 6) })
		effects := lg.effects(t, "ship")
		for _, id := range uuids {
			if effects[id] != 1 {
				t.Errorf("message %s: %d ship effects, want 1", id, effects[id])
			}
			auditMu.Lock()
			n := audited[id]
			auditMu.Unlock()
			if n != 1 {
				t.Errorf("message %s: audited %d times, want 1", id, n)
			}
		}
		if len(effects) != messages {
			t.Errorf("%d messages have effects, want %d", len(effects), messages)
		}
		t.Logf("%d messages, 6 deliveries each per handler, %d nacked deliveries", messages, a.nacks.Load())
	})
}

// A handler error releases the key and is returned, so that the message
// is nacked; the redelivery runs the handler; a delivery after that is
// acknowledged without running it, and returns what the run produced.
func TestHandlerErrorRedelivers(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		n := lg.node(t)
		boom := errors.New("the warehouse did not answer")
		runs := 0
		h := wrap(t, n.store, func(msg *message.Message) ([]*message.Message, error) {
			runs++
			if runs == 1 {
				return nil, boom
			}
			return []*message.Message{message.NewMessage("out-1", []byte("shipped"))}, nil
		})
		if out, err := h(delivery(t, "m-1", "{}")); !errors.Is(err, boom) || out != nil {
			t.Fatalf("failing delivery: %v, %v; want the handler's error", out, err)
		}
		out, err := h(delivery(t, "m-1", "{}"))
		if err != nil || len(out) != 1 || out[0].UUID != "out-1" || string(out[0].Payload) != "shipped" {
			t.Fatalf("redelivery: %v, %v; want the handler's message", out, err)
		}
		if out, err := h(delivery(t, "m-1", "{}")); err != nil || len(out) != 1 || out[0].UUID != "out-1" {
			t.Fatalf("duplicate: %v, %v; want an ack with the recorded message", out, err)
		}
		if runs != 2 {
			t.Fatalf("the handler ran %d times, want 2", runs)
		}
	})
}

// A panic is an error like any other: the key is released, the message
// nacked, the redelivery runs.
func TestHandlerPanicRedelivers(t *testing.T) {
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	runs := 0
	h := wrap(t, n.store, func(*message.Message) ([]*message.Message, error) {
		runs++
		if runs == 1 {
			panic("nil map")
		}
		return nil, nil
	})
	_, err := h(delivery(t, "m-1", "{}"))
	var pe *tiered.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("panicking delivery: %v, want a *tiered.PanicError", err)
	}
	if _, err := h(delivery(t, "m-1", "{}")); err != nil || runs != 2 {
		t.Fatalf("redelivery: %v, runs %d; want a run", err, runs)
	}
}

// The messages a run produced are its record: the first delivery returns
// them as recorded, and a duplicate, on any instance, returns them again
// (by default) with the same UUIDs; under WithRepublish(false) a
// duplicate returns nothing.
func TestProducedMessages(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		a, b := lg.node(t), lg.node(t)
		out1 := message.NewMessage("out-1", []byte(`{"shipment":1}`))
		out1.Metadata.Set("kind", "shipment")
		out1.Metadata.Set("name\xc3", "\xff\xfe\x00\x01") // invalid UTF-8 and binary, kept byte for byte
		out2 := message.NewMessage("out-2", []byte{0, 1, 2, 255})
		var c counter
		first, err := wrap(t, a.store, c.handler(out1, out2))(delivery(t, "m-1", "{}"))
		if err != nil {
			t.Fatal(err)
		}
		same := func(what string, got []*message.Message) {
			t.Helper()
			if len(got) != 2 || !got[0].Equals(out1) || !got[1].Equals(out2) {
				t.Fatalf("%s: %v; want the produced messages as recorded", what, got)
			}
		}
		same("first delivery", first)
		out, err := wrap(t, b.store, c.handler())(delivery(t, "m-1", "{}"))
		if err != nil {
			t.Fatal(err)
		}
		same("duplicate", out)
		if out, err := wrap(t, b.store, c.handler(), idemwatermill.WithRepublish(false))(delivery(t, "m-1", "{}")); err != nil || out != nil {
			t.Fatalf("duplicate under WithRepublish(false): %v, %v; want nothing produced", out, err)
		}
		if n := c.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
	})
}

// A delivery whose message another consumer is still running waits for it
// up to the Store's wait; when it does not finish in time the delivery is
// nacked with idem.ErrInFlight (never acknowledged, never run twice). Once
// the owner finishes, the next delivery is a duplicate.
func TestInFlightDeliveryIsNacked(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		a, b := lg.node(t), lg.node(t, tiered.WithWait(50*time.Millisecond))
		started, release := make(chan struct{}), make(chan struct{})
		var c counter
		owner := make(chan error, 1)
		go func() {
			_, err := wrap(t, a.store, func(msg *message.Message) ([]*message.Message, error) {
				close(started)
				<-release
				return c.handler()(msg)
			})(delivery(t, "m-1", "{}"))
			owner <- err
		}()
		<-started
		_, err := wrap(t, b.store, c.handler(), idemwatermill.WithNackDelay(time.Millisecond))(delivery(t, "m-1", "{}"))
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("delivery while another consumer runs it: %v, want ErrInFlight", err)
		}
		close(release)
		if err := <-owner; err != nil {
			t.Fatalf("owner: %v", err)
		}
		if out, err := wrap(t, b.store, c.handler())(delivery(t, "m-1", "{}")); err != nil || out != nil {
			t.Fatalf("after the owner: %v, %v; want an ack", out, err)
		}
		if n := c.runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
	})
}

// What identifies a message: its UUID, a metadata field, or its payload's
// fingerprint. A delivery without its identity, or whose payload is not
// what its identity was first seen with, is refused (nacked) and runs
// nothing.
func TestIdentity(t *testing.T) {
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	var c counter
	byUUID := wrap(t, n.store, c.handler())
	byEvent := wrap(t, n.store, c.handler(), idemwatermill.WithIdentity(idemwatermill.Metadata("event_id")))
	byPayload := wrap(t, n.store, c.handler(), idemwatermill.WithIdentity(idemwatermill.Payload(fingerprint.WithDeny("sent_at"))))
	for _, tc := range []struct {
		name    string
		h       message.HandlerFunc
		msg     *message.Message
		wantErr error
		runs    int64 // the handler's runs after the delivery
	}{
		{"uuid", byUUID, delivery(t, "u-1", `{"a":1}`), nil, 1},
		{"uuid again", byUUID, delivery(t, "u-1", `{"a":1}`), nil, 1},
		{"uuid, other payload", byUUID, delivery(t, "u-1", `{"a":2}`), idem.ErrMismatch, 1},
		{"empty uuid", byUUID, delivery(t, "", `{}`), idemwatermill.ErrNoIdentity, 1},
		{"event", byEvent, delivery(t, "u-2", `{}`, "event_id", "evt-1"), nil, 2},
		{"event, publisher's retry under a new UUID", byEvent, delivery(t, "u-3", `{}`, "event_id", "evt-1"), nil, 2},
		{"no event_id", byEvent, delivery(t, "u-4", `{}`), idemwatermill.ErrNoIdentity, 2},
		{"payload", byPayload, delivery(t, "u-5", `{"order":7,"sent_at":"10:00"}`), nil, 3},
		{"payload, sent again later", byPayload, delivery(t, "u-6", `{ "sent_at":"10:05", "order":7 }`), nil, 3},
		{"payload, another order", byPayload, delivery(t, "u-7", `{"order":8,"sent_at":"10:05"}`), nil, 4},
		{"payload, not JSON", byPayload, delivery(t, "u-8", `{"order":`), fingerprint.ErrInvalidJSON, 4},
	} {
		_, err := tc.h(tc.msg)
		if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
		if got := c.runs.Load(); got != tc.runs {
			t.Fatalf("%s: the handler has run %d times, want %d", tc.name, got, tc.runs)
		}
	}
}

// Without WithConsumer the keys live in the router handler's scope: two
// handlers on one topic each process the message once; with it, two
// routers' handlers of other names share their keys.
func TestScope(t *testing.T) {
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	pubsub := gochannel.NewGoChannel(gochannel.Config{}, logger)
	t.Cleanup(func() { _ = pubsub.Close() })
	a := newAcks()
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(name string) message.NoPublishHandlerFunc {
		return func(*message.Message) error {
			mu.Lock()
			runs[name]++
			mu.Unlock()
			return nil
		}
	}
	r := must.Get(message.NewRouter(message.RouterConfig{}, logger))(t)
	r.AddMiddleware(a.middleware, must.Get(idemwatermill.New(n.store))(t))
	r.AddConsumerHandler("ship", "orders", pubsub, count("ship"))
	r.AddConsumerHandler("bill", "orders", pubsub, count("bill"))
	shared := must.Get(idemwatermill.New(n.store, idemwatermill.WithConsumer("notify")))(t)
	r.AddConsumerHandler("notify-v1", "orders", pubsub, count("notify")).AddMiddleware(shared)
	r.AddConsumerHandler("notify-v2", "orders", pubsub, count("notify")).AddMiddleware(shared)
	runRouter(t, r)
	msg := message.NewMessage("m-1", []byte("{}"))
	for range 2 {
		if err := pubsub.Publish("orders", msg.Copy()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every delivery acknowledged", func() bool {
		for _, h := range []string{"ship", "bill", "notify-v1", "notify-v2"} {
			if a.count(h, "m-1") != 2 {
				return false
			}
		}
		return true
	}, func() string { return a.short([]string{"ship", "bill", "notify-v1", "notify-v2"}, []string{"m-1"}, 2) })
	mu.Lock()
	defer mu.Unlock()
	if runs["ship"] != 1 || runs["bill"] != 1 || runs["notify"] != 1 {
		t.Fatalf("runs %v; want ship, bill and notify (one scope for two handlers) once each", runs)
	}
}

// When no decision can be made, the message is nacked and the handler does
// not run.
func TestNoDecisionNoRun(t *testing.T) {
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	var c counter
	h := wrap(t, n.store, c.handler())
	_ = n.store.Close()
	if _, err := h(delivery(t, "m-1", "{}")); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed Store: %v, want ErrClosed", err)
	}
	if c.runs.Load() != 0 {
		t.Fatal("the handler ran without a decision")
	}
}

// New refuses a nil Store and nonsense, naming each fault.
func TestNewErrors(t *testing.T) {
	n := newLedger(t, stacktest.Embedded(t)).node(t)
	for _, tc := range []struct {
		name  string
		store *tiered.Store
		opts  []idemwatermill.Option
		want  string
	}{
		{"nil store", nil, nil, "idemwatermill: New: give a store"},
		{"empty consumer", n.store, []idemwatermill.Option{idemwatermill.WithConsumer("")}, "idemwatermill: WithConsumer: give "},
		{"zero identity", n.store, []idemwatermill.Option{idemwatermill.WithIdentity(idemwatermill.Identity{})}, "WithIdentity: give UUID(), Metadata(name) or Payload(opts...) (got a zero Identity)"},
		{"empty metadata field", n.store, []idemwatermill.Option{idemwatermill.WithIdentity(idemwatermill.Metadata(""))}, "WithIdentity: Metadata: give a field name"},
		{"bad fingerprint path", n.store, []idemwatermill.Option{idemwatermill.WithIdentity(idemwatermill.Payload(fingerprint.WithDeny("a..b")))},
			"idemwatermill: WithIdentity: Payload: fingerprint: WithDeny: give "},
		{"negative delay", n.store, []idemwatermill.Option{idemwatermill.WithNackDelay(-time.Second)}, "idemwatermill: WithNackDelay: give "},
		{"nil logger", n.store, []idemwatermill.Option{idemwatermill.WithLogger(nil)}, "idemwatermill: WithLogger: give "},
	} {
		_, err := idemwatermill.New(tc.store, tc.opts...)
		if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), idem.ErrConfig.Error()) != 1 {
			t.Errorf("%s: %v; want ErrConfig, said once, naming %q", tc.name, err, tc.want)
		}
	}
}
