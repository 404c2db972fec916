package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// BenchmarkConsumer measures messages per second through a Watermill
// router: a publisher sends new messages (each its own UUID and payload)
// and one handler decodes each, behind one of four guards, on two
// transports:
//
//   - transport=gochannel: Watermill's in-process GoChannel, which hands a
//     subscriber one message at a time;
//   - transport=jetstream: NATS JetStream on an embedded nats-server (a
//     file-backed stream, a durable push consumer with four subscribers in
//     one queue group, synchronous publishes and acks) through
//     watermill-nats.
//
// The guards:
//
//   - impl=none: the handler alone;
//   - impl=dedup: Watermill's middleware.Deduplicator with its in-memory
//     repository, keyed by the message's UUID (it marks a message seen
//     before its handler runs, in one process);
//   - impl=idem-mem: idemwatermill over a Store whose only tier is memlayer;
//   - impl=idem-tiers: idemwatermill over the Redis + SQL Store the other
//     benchmarks use (embedded miniredis and SQLite unless IDEM_REDIS_URL
//     and IDEM_POSTGRES_DSN name real servers).
//
// At most window messages are in flight: the publishers wait for a handler
// to finish before they send more, so the figure is what the consumer
// sustains, not how fast the broker queues. One op is one message, from its
// publish to the end of the guard's work around the handler; msgs/s is
// b.N over the elapsed time. Compare the guards with
//
//	benchstat -col /impl consumer.txt
func BenchmarkConsumer(b *testing.B) {
	for _, tr := range transports {
		for _, g := range guards {
			b.Run("transport="+tr.name+"/impl="+g.name, func(b *testing.B) {
				benchConsumer(b, tr, g)
			})
		}
	}
}

// consumerLeaks are the goroutines TestMain lets outlive the benchmarks:
// Watermill's in-memory ExpiringKeyRepository starts a clean-up loop that
// nothing stops.
var consumerLeaks = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/ThreeDotsLabs/watermill/message/router/middleware.(*mapExpiringKeyRepository).cleanOutLoop"),
}

const (
	// window is how many published messages may wait for the handler.
	window = 256
	// publishers is how many goroutines publish.
	publishers = 4
)

// consumerTransport opens a publisher and a subscriber of one broker.
type consumerTransport struct {
	name string
	open func(b *testing.B) (message.Publisher, message.Subscriber)
}

var transports = []consumerTransport{
	{"gochannel", openGoChannel},
	{"jetstream", openJetStream},
}

// consumerGuard builds the middleware that guards the handler; nil for none.
type consumerGuard struct {
	name string
	mw   func(b *testing.B) message.HandlerMiddleware
}

var guards = []consumerGuard{
	{"none", func(*testing.B) message.HandlerMiddleware { return nil }},
	{"dedup", func(*testing.B) message.HandlerMiddleware {
		repo, err := middleware.NewMapExpiringKeyRepository(time.Minute)
		if err != nil {
			panic(err)
		}
		d := &middleware.Deduplicator{
			// The UUID: the default checksum of the payload collides
			// between distinct messages, and drops them.
			KeyFactory: func(m *message.Message) (string, error) { return m.UUID, nil },
			Repository: repo,
			Timeout:    time.Second,
		}
		return d.Middleware
	}},
	{"idem-mem", func(b *testing.B) message.HandlerMiddleware {
		s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(b)), tiered.WithRetention(retention))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return must.Get(idemwatermill.New(s))(b)
	}},
	{"idem-tiers", func(b *testing.B) message.HandlerMiddleware {
		return must.Get(idemwatermill.New(newStack(b).store(b)))(b)
	}},
}

// order is the payload: a small JSON order event.
type order struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// consumerRun is one timed batch of messages: the publishers take a credit
// for each message, the outermost middleware returns it.
type consumerRun struct {
	want     int64
	credits  chan struct{}
	finished chan struct{}
	handled  atomic.Int64 // handler executions
	done     atomic.Int64 // messages through the whole chain
}

func benchConsumer(b *testing.B, tr consumerTransport, g consumerGuard) {
	pub, sub := tr.open(b)
	guard := g.mw(b)
	topic := testenv.Name("bench_consumer")

	var current atomic.Pointer[consumerRun]
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	// Outermost: a message is done when the guard's work around the
	// handler is, and frees a credit.
	router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil {
				r := current.Load()
				<-r.credits
				if r.done.Add(1) == r.want {
					close(r.finished)
				}
			}
			return out, err
		}
	})
	if guard != nil {
		router.AddMiddleware(guard)
	}
	router.AddConsumerHandler("bench-consumer", topic, sub, func(msg *message.Message) error {
		var o order
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return err
		}
		if o.Amount <= 0 {
			return fmt.Errorf("order %s: amount %d", o.OrderID, o.Amount)
		}
		current.Load().handled.Add(1)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := router.Run(ctx); err != nil {
			b.Error(err)
		}
	}()
	b.Cleanup(func() {
		cancel()
		_ = router.Close()
		<-stopped
	})
	<-router.Running()

	var seq atomic.Int64
	b.Run("window="+strconv.Itoa(window), func(b *testing.B) {
		r := &consumerRun{want: int64(b.N), credits: make(chan struct{}, window), finished: make(chan struct{})}
		current.Store(r)
		b.ReportAllocs()
		b.ResetTimer()
		var wg sync.WaitGroup
		for p := range publishers {
			wg.Go(func() {
				for i := p; i < b.N; i += publishers {
					n := seq.Add(1)
					payload, _ := json.Marshal(order{OrderID: "ord_" + strconv.FormatInt(n, 36), Customer: "cus_42", Amount: 4200, Currency: "EUR"})
					r.credits <- struct{}{}
					if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		select {
		case <-r.finished:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d messages through the handler after a minute", r.done.Load(), b.N)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		if h := r.handled.Load(); h != int64(b.N) {
			b.Fatalf("the handler ran %d times for %d messages", h, b.N)
		}
	})
}

// openGoChannel returns Watermill's in-process pub/sub.
func openGoChannel(b *testing.B) (message.Publisher, message.Subscriber) {
	ps := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	b.Cleanup(func() { _ = ps.Close() })
	return ps, ps
}

// openJetStream starts an embedded nats-server with JetStream on a
// loopback port and returns a watermill-nats publisher and subscriber on
// it: a file-backed stream per topic, a durable consumer, four subscribers
// in one queue group, synchronous acks.
func openJetStream(b *testing.B) (message.Publisher, message.Subscriber) {
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: b.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("the embedded nats-server is not ready after 10 s")
	}
	js := wmnats.JetStreamConfig{
		AutoProvision:    true,
		TrackMsgId:       true,
		DurablePrefix:    "bench",
		SubscribeOptions: []nats.SubOpt{nats.AckExplicit(), nats.AckWait(30 * time.Second), nats.DeliverAll()},
	}
	pub, err := wmnats.NewPublisher(wmnats.PublisherConfig{URL: ns.ClientURL(), JetStream: js}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	sub, err := wmnats.NewSubscriber(wmnats.SubscriberConfig{
		URL: ns.ClientURL(), QueueGroupPrefix: "bench", SubscribersCount: publishers,
		AckWaitTimeout: 30 * time.Second, CloseTimeout: 10 * time.Second, JetStream: js,
	}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Close() })
	return pub, sub
}
