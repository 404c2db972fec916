package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wmkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	metrics "github.com/rcrowley/go-metrics"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// TestConsumerKafkaWatermill runs Watermill's Kafka pub/sub (watermill-kafka,
// on Sarama) against the kfake cluster: a publisher sends 300 events, a
// tenth of them twice under the same event_id (a publisher's retry, under
// a new UUID); three routers in one consumer group take them through
// idemwatermill (identity: the event_id metadata, which watermill-kafka
// carries as a header) and write each effect with idemwatermill.Complete
// in the handler's transaction. A third of the way through, one router
// crashes (its connections cut: Sarama commits marked offsets every 3 s
// here, so what it processed since is not committed) and another takes
// its place. Every event has exactly one effect and the group's offsets
// reach the end of every partition.
func TestConsumerKafkaWatermill(t *testing.T) {
	const n = 300
	// Sarama's metrics start a goroutine of go-metrics that never ends
	// (its meters' arbiter): without metrics, Sarama leaves nothing
	// running once its clients close.
	metrics.UseNilMetrics = true
	r := newKafkaRig(t, 3)
	db := r.sql.Open(t)
	records := testenv.Name("idem_krec")
	sl := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(records), sqllayer.WithEventsTable(r.events)))(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sl.Init(ctx); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { _, _ = r.admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+records) })
	store := must.Get(tiered.New(tiered.WithSQL(sl), tiered.WithLease(2*time.Second), tiered.WithWait(time.Second)))(t)
	t.Cleanup(func() { _ = store.Close() })
	mw := must.Get(idemwatermill.New(store, idemwatermill.WithIdentity(idemwatermill.Metadata("event_id")),
		idemwatermill.WithNackDelay(50*time.Millisecond)))(t)

	pub, err := wmkafka.NewPublisher(wmkafka.PublisherConfig{Brokers: r.cluster.ListenAddrs(), Marshaler: wmkafka.DefaultMarshaler{}}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("watermill-kafka publisher on kfake: %v", err)
	}
	var msgs []*message.Message
	for i := range n {
		id := fmt.Sprintf("evt-%d", i+1)
		payload := []byte(`{"amount":100,"event_id":"` + id + `"}`)
		for range 1 + map[bool]int{true: 1}[i%10 == 0] {
			m := message.NewMessage(watermill.NewUUID(), payload)
			m.Metadata.Set("event_id", id)
			msgs = append(msgs, m)
		}
	}
	if err := pub.Publish(r.topic, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}
	_ = pub.Close()

	var deliveries, runs atomic.Int64
	count := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			deliveries.Add(1)
			return h(msg)
		}
	}
	handler := func(msg *message.Message) ([]*message.Message, error) {
		runs.Add(1)
		err := db.RunInTx(msg.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			part, _ := wmkafka.MessagePartitionFromCtx(msg.Context())
			off, _ := wmkafka.MessagePartitionOffsetFromCtx(msg.Context())
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+r.effects+" (event_id, member, part, off) VALUES (?, 'watermill', ?, ?)",
				msg.Metadata.Get("event_id"), part, off); err != nil {
				return err
			}
			return idemwatermill.Complete(ctx, tx, sl)
		})
		return nil, err
	}
	var mu sync.Mutex // guards routers
	var routers []*wmRouter
	for range 3 {
		routers = append(routers, startWMKafkaRouter(t, r, count, mw, handler))
	}
	// A third of the way, the first router crashes and another joins.
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := r.state(context.Background())
		if err == nil && s.distinct >= n/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third of the events did not arrive in a minute: %+v, %v", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	routers[0].crash()
	routers = append(routers[1:], startWMKafkaRouter(t, r, count, mw, handler))
	mu.Unlock()
	s := r.waitDone(n, 2*time.Minute)
	for _, x := range routers {
		x.close()
	}
	t.Logf("watermill-kafka: %d events in %d messages, %d deliveries, %d handler runs, %d effects of %d events, offsets %d of %d",
		n, len(msgs), deliveries.Load(), runs.Load(), s.effects, s.distinct, s.committed, s.end)
	if s.effects != n || s.distinct != n {
		t.Errorf("%d effects of %d distinct events, want exactly %d of %d", s.effects, s.distinct, n, n)
	}
	if s.committed != s.end || s.end != int64(len(msgs)) {
		t.Errorf("offsets committed to %d of %d, want all %d messages", s.committed, s.end, len(msgs))
	}
	if deliveries.Load() <= int64(len(msgs)) {
		t.Errorf("%d deliveries of %d messages: the crash redelivered nothing, so the test proved nothing about it", deliveries.Load(), len(msgs))
	}
}

var wmLogger watermill.LoggerAdapter = watermill.NopLogger{}

// wmRouter is one Watermill router on a watermill-kafka subscriber.
type wmRouter struct {
	router *message.Router
	dialer *cuttableDialer
	done   chan error
	once   sync.Once
}

// startWMKafkaRouter starts a router whose handler takes the rig's topic
// through count (outermost) and mw, as a member of the rig's group.
func startWMKafkaRouter(t *testing.T, r *kafkaRig, count, mw message.HandlerMiddleware, h message.HandlerFunc) *wmRouter {
	t.Helper()
	x := &wmRouter{dialer: &cuttableDialer{}, done: make(chan error, 1)}
	cfg := wmkafka.DefaultSaramaSubscriberConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Session.Timeout = kafkaSession
	cfg.Consumer.Group.Heartbeat.Interval = kafkaHeartbeat
	cfg.Consumer.Offsets.AutoCommit.Interval = 3 * time.Second
	cfg.Net.DialTimeout = time.Second
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = x.dialer
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	sub, err := wmkafka.NewSubscriber(wmkafka.SubscriberConfig{
		Brokers: r.cluster.ListenAddrs(), Unmarshaler: wmkafka.DefaultMarshaler{},
		OverwriteSaramaConfig: cfg, ConsumerGroup: r.group,
		NackResendSleep: 50 * time.Millisecond, ReconnectRetrySleep: 100 * time.Millisecond,
	}, wmLogger)
	if err != nil {
		t.Fatalf("watermill-kafka subscriber on kfake: %v", err)
	}
	x.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, wmLogger)
	if err != nil {
		t.Fatal(err)
	}
	x.router.AddMiddleware(count, mw)
	x.router.AddConsumerHandler("payments", r.topic, sub, func(msg *message.Message) error {
		_, err := h(msg)
		return err
	})
	go func() { x.done <- x.router.Run(context.Background()) }()
	select {
	case <-x.router.Running():
	case err := <-x.done:
		t.Fatalf("router: %v", err)
	}
	t.Cleanup(x.close)
	return x
}

// crash cuts the router's connections, then closes it: nothing it marked
// since its last commit reaches the broker.
func (x *wmRouter) crash() {
	x.dialer.cut()
	x.close()
}

func (x *wmRouter) close() {
	x.once.Do(func() {
		_ = x.router.Close()
		<-x.done
	})
}

// Dial makes the dialer a proxy dialer for Sarama (Net.Proxy.Dialer).
func (d *cuttableDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := d.DialContext(context.Background(), network, addr)
	if err != nil {
		return nil, errors.Join(err, net.ErrClosed)
	}
	return c, nil
}
