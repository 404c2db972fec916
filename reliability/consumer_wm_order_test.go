//go:build unix

package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// What a handler's runs do in the middleware-order scenarios: each run
// that succeeds produces one message under a UUID of its own, so that a
// second run's output would show as a second UUID.
var (
	produceOne = func(context.Context, int64) ([]*message.Message, error) {
		return []*message.Message{message.NewMessage(watermill.NewUUID(), []byte("shipped"))}, nil
	}
	// The first run outlives a 100 ms Timeout (ignoring its context, as a
	// handler stuck in a call does), then succeeds.
	slowFirst = func(ctx context.Context, run int64) ([]*message.Message, error) {
		if run == 1 {
			time.Sleep(300 * time.Millisecond)
		}
		return produceOne(ctx, run)
	}
	failFirst = func(ctx context.Context, run int64) ([]*message.Message, error) {
		if run == 1 {
			return nil, errFirst
		}
		return produceOne(ctx, run)
	}
	// The first run waits 300 ms for its work, or until its context ends,
	// and then returns the context's error: a handler that heeds it.
	heedFirst = func(ctx context.Context, run int64) ([]*message.Message, error) {
		if run == 1 {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return produceOne(ctx, run)
	}
	panicFirst = func(ctx context.Context, run int64) ([]*message.Message, error) {
		if run == 1 {
			panic("the handler panicked (first run)")
		}
		return produceOne(ctx, run)
	}
)

// TestConsumerMiddlewareOrders: each of Watermill's middlewares (Timeout,
// Retry, Recoverer, PoisonQueue, Throttle) before idem's (outside it) and
// after it (between idem and the handler), with idem's default options,
// on JetStream: how often the handler runs, how often its produced message
// is published (always under the one UUID of the run that completed), and
// whether the input ends in the poison queue. Every input ends acked.
// docs/consumers.md publishes this table.
func TestConsumerMiddlewareOrders(t *testing.T) {
	type mwFor func(r *wmRig) message.HandlerMiddleware
	timeout := func(*wmRig) message.HandlerMiddleware { return middleware.Timeout(100 * time.Millisecond) }
	retry := func(*wmRig) message.HandlerMiddleware {
		return middleware.Retry{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond, Multiplier: 2}.Middleware
	}
	recoverer := func(*wmRig) message.HandlerMiddleware { return middleware.Recoverer }
	poison := func(r *wmRig) message.HandlerMiddleware {
		pq, err := middleware.PoisonQueue(r.pub.inner, r.poison)
		if err != nil {
			r.t.Fatal(err)
		}
		return pq
	}
	throttle := func(*wmRig) message.HandlerMiddleware { return middleware.NewThrottle(20, time.Second).Middleware }
	both := func(a, b mwFor) mwFor { // a, then b
		return func(r *wmRig) message.HandlerMiddleware {
			outer, inner := a(r), b(r)
			return func(h message.HandlerFunc) message.HandlerFunc { return outer(inner(h)) }
		}
	}
	cases := []struct {
		name      string
		mw        mwFor
		handler   func(ctx context.Context, run int64) ([]*message.Message, error)
		runs      [2]int64 // handler runs: before idem, after it
		published int      // publishes of the produced message
		poisoned  uint64   // inputs in the poison queue
	}{
		{"Timeout", timeout, slowFirst, [2]int64{1, 1}, 1, 0},
		// Before idem the Timeout does not reach the handler, whose run
		// ends on its own; after it, the first run gives up and fails, and
		// the redelivery runs again.
		{"Timeout-heeded", timeout, heedFirst, [2]int64{1, 2}, 1, 0},
		{"Retry", retry, failFirst, [2]int64{2, 2}, 1, 0},
		{"Recoverer", recoverer, panicFirst, [2]int64{2, 2}, 1, 0},
		{"PoisonQueue", poison, failFirst, [2]int64{1, 1}, 0, 1},
		{"Throttle", throttle, produceOne, [2]int64{1, 1}, 1, 0},
		// A poison queue that acks whatever error a Timeout caused.
		{"PoisonQueue+Timeout", both(poison, timeout), slowFirst, [2]int64{1, 1}, 1, 0},
	}
	testenv.AllSQL(t, func(t *testing.T, sql *testenv.SQL) {
		for _, tc := range cases {
			for _, before := range []bool{true, false} {
				name := tc.name + "/after"
				if before {
					name = tc.name + "/before"
				}
				t.Run(name, func(t *testing.T) {
					r := newWMRig(t, 30*time.Second)
					store, _ := wmStore(t, wmStack(t, sql))
					idem, err := idemwatermill.New(store)
					if err != nil {
						t.Fatal(err)
					}
					chain := []message.HandlerMiddleware{idem, tc.mw(r)}
					if before {
						chain = []message.HandlerMiddleware{tc.mw(r), idem}
					}
					var h runs
					r.run(h.handler(tc.handler), chain...)
					r.publish(message.NewMessage("m-1", []byte(`{"order":1}`)))
					r.waitDrained()
					deliveries, nacks := r.counts("m-1")
					pub := r.pub.published()
					t.Logf("%d deliveries (%d nacked), %d runs, %d publishes", deliveries, nacks, h.n.Load(), len(pub))
					want := tc.runs[1]
					if before {
						want = tc.runs[0]
					}
					if n := h.n.Load(); n != want {
						t.Errorf("the handler ran %d times, want %d", n, want)
					}
					if len(pub) != tc.published {
						t.Errorf("the produced message was published %d times, want %d", len(pub), tc.published)
					}
					for _, m := range pub {
						if m.UUID != pub[0].UUID {
							t.Errorf("published under UUIDs %s and %s: two runs' outputs", pub[0].UUID, m.UUID)
						}
					}
					if n := r.streamMsgs(r.out); n != uint64(len(pub)) {
						t.Errorf("the output stream holds %d messages, %d were published", n, len(pub))
					}
					if n := r.streamMsgs(r.poison); n != tc.poisoned {
						t.Errorf("the poison queue holds %d messages, want %d", n, tc.poisoned)
					}
				})
			}
		}
	})
}
