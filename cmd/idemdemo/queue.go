package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/idemwatermill"
)

// Shipment is the effect of the queue consumers (scenario 9): one row per
// order shipped. Nothing in the table stops a second row for an order: only
// idem does.
type Shipment struct {
	bun.BaseModel `bun:"table:idemdemo_shipments"`

	ID       int64  `bun:",pk,autoincrement"`
	OrderID  string `bun:",notnull"`
	Consumer string `bun:",notnull"`
}

const (
	queueOrders = 30
	// queueAckWait is the consumer's AckWait: a delivery not acknowledged
	// within it is redelivered to another member of the group.
	queueAckWait = 2 * time.Second
	// queueGroup names the durable consumer and its queue group.
	queueGroup = "shipping"
)

// order is the payload of one message on the orders stream.
type order struct {
	OrderID string `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int    `json:"qty"`
}

// broker is an embedded nats-server with JetStream on a loopback port, its
// store in a temporary directory.
type broker struct {
	ns  *server.Server
	dir string
}

func startBroker() (*broker, error) {
	dir, err := os.MkdirTemp("", "idemdemo-nats-")
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	ns.Start()
	b := &broker{ns: ns, dir: dir}
	if !ns.ReadyForConnections(10 * time.Second) {
		b.close()
		return nil, errors.New("embedded nats-server: not ready after 10 s")
	}
	return b, nil
}

func (b *broker) url() string { return b.ns.ClientURL() }

func (b *broker) close() {
	b.ns.Shutdown()
	b.ns.WaitForShutdown()
	_ = os.RemoveAll(b.dir)
}

// queueRun is what one play of the scenario observes.
type queueRun struct {
	run        string
	crashOrder string      // the order whose first committer dies before its ack
	crashed    chan string // the name of the consumer that died, once

	mu         sync.Mutex
	crashDone  bool
	deliveries map[string]int // per message UUID
	runs       int            // handler executions that committed
	failures   int            // handler executions that failed (nacked)
}

// shipper is one consumer process: its own NATS connection, a Watermill
// router, and idemwatermill over its instance's Store.
type shipper struct {
	name    string
	in      *instance
	guarded bool
	q       *queueRun
	conn    *nats.Conn
	router  *message.Router
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

func startShipper(ctx context.Context, name string, in *instance, guarded bool, q *queueRun, url, topic string) (*shipper, error) {
	s := &shipper{name: name, in: in, guarded: guarded, q: q, done: make(chan struct{})}
	var err error
	if s.conn, err = nats.Connect(url, nats.Name(name)); err != nil {
		return nil, err
	}
	sub, err := wmnats.NewSubscriberWithNatsConn(s.conn, wmnats.SubscriberSubscriptionConfig{
		Unmarshaler:       &wmnats.NATSMarshaler{},
		SubjectCalculator: wmnats.DefaultSubjectCalculator,
		QueueGroupPrefix:  queueGroup,
		SubscribersCount:  1,
		AckWaitTimeout:    queueAckWait,
		CloseTimeout:      5 * time.Second,
		JetStream: wmnats.JetStreamConfig{
			DurablePrefix:    queueGroup,
			SubscribeOptions: []nats.SubOpt{nats.AckExplicit(), nats.AckWait(queueAckWait), nats.DeliverAll()},
		},
	}, watermill.NopLogger{})
	if err != nil {
		s.conn.Close()
		return nil, err
	}
	guard, err := idemwatermill.New(in.store,
		idemwatermill.WithConsumer(queueGroup),
		idemwatermill.WithIdentity(idemwatermill.Metadata("order_id")))
	if err != nil {
		_ = sub.Close()
		return nil, err
	}
	s.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		_ = sub.Close()
		return nil, err
	}
	s.router.AddMiddleware(q.countDelivery)
	if guarded {
		s.router.AddMiddleware(guard)
	}
	s.router.AddConsumerHandler("ship-orders", topic, sub, s.ship)
	rctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = s.router.Run(rctx)
	}()
	select {
	case <-s.router.Running():
		return s, nil
	case <-s.done:
		cancel()
		return nil, fmt.Errorf("%s: the router stopped before it ran", name)
	}
}

// countDelivery counts every delivery of a message, before the guard.
func (q *queueRun) countDelivery(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		q.mu.Lock()
		q.deliveries[msg.UUID]++
		q.mu.Unlock()
		return h(msg)
	}
}

// ship is the handler: the shipment row and idem's processed mark commit in
// one transaction. The consumer that first commits the crash order dies
// right after its commit: its NATS connection closes, so the ack never
// reaches the broker.
func (s *shipper) ship(msg *message.Message) error {
	var o order
	if err := json.Unmarshal(msg.Payload, &o); err != nil {
		return err
	}
	err := s.in.db.RunInTx(msg.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&Shipment{OrderID: o.OrderID, Consumer: s.name}).Exec(ctx); err != nil {
			return err
		}
		if !s.guarded {
			return nil
		}
		return idemwatermill.Complete(ctx, tx, s.in.sql)
	})
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if err != nil {
		s.q.failures++
		return err
	}
	s.q.runs++
	if o.OrderID == s.q.crashOrder && !s.q.crashDone {
		s.q.crashDone = true
		s.conn.Close() // committed; the ack goes nowhere
		s.q.crashed <- s.name
	}
	return nil
}

// stop ends the consumer: its router, its subscription, its connection.
func (s *shipper) stop() {
	s.once.Do(func() {
		_ = s.router.Close()
		s.cancel()
		<-s.done
		s.conn.Close()
	})
}

// queue is scenario 9: orders on a JetStream stream, three consumers in one
// group, a publisher that retries, a consumer that dies between its commit
// and its ack.
func (d *demo) queue(ctx context.Context) (string, error) {
	b, err := startBroker()
	if err != nil {
		return "", err
	}
	defer b.close()
	topic := "idemdemo_orders_" + d.run
	q := &queueRun{
		run:        d.run,
		crashOrder: orderID(d.run, 5),
		crashed:    make(chan string, 1),
		deliveries: map[string]int{},
	}

	nc, err := nats.Connect(b.url(), nats.Name("idemdemo-admin"))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return "", err
	}
	// Nats-Msg-Id deduplication within two minutes (JetStream's default
	// window): the publisher's same-ID retries are dropped by the broker.
	if _, err := js.AddStream(&nats.StreamConfig{Name: topic, Subjects: []string{topic}, Duplicates: 2 * time.Minute}, nats.Context(ctx)); err != nil {
		return "", fmt.Errorf("create the stream: %w", err)
	}

	shippers := make([]*shipper, 0, len(d.instances))
	defer func() {
		for _, s := range shippers {
			s.stop()
		}
	}()
	for i, in := range d.instances {
		s, err := startShipper(ctx, "consumer-"+string(rune('a'+i)), in, !d.unguarded, q, b.url(), topic)
		if err != nil {
			return "", err
		}
		shippers = append(shippers, s)
	}

	publishes, err := publishOrders(b.url(), topic, d.run)
	if err != nil {
		return "", err
	}

	// Wait until the broker holds no message unacknowledged: the one whose
	// ack was lost comes back after AckWait to a consumer still alive.
	dead := ""
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var stored uint64
	for {
		select {
		case name := <-q.crashed:
			dead = name
			for _, s := range shippers {
				if s.name == name {
					s.stop()
				}
			}
			continue
		case <-ctx.Done():
			return "", fmt.Errorf("the broker still has unacknowledged messages (%s): %w", q.summary(), ctx.Err())
		case <-tick.C:
		}
		si, err := js.StreamInfo(topic, nats.Context(ctx))
		if err != nil {
			return "", err
		}
		ci, err := js.ConsumerInfo(topic, queueGroup, nats.Context(ctx))
		if err != nil {
			return "", err
		}
		stored = si.State.Msgs
		if dead != "" && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream >= si.State.LastSeq {
			break
		}
	}
	for _, s := range shippers {
		s.stop()
	}

	perOrder, err := d.shipmentsPerOrder(ctx)
	if err != nil {
		return "", err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	deliveries, redeliveries := 0, 0
	for _, n := range q.deliveries {
		deliveries += n
		redeliveries += n - 1
	}
	shipments := 0
	var wrong []string
	for i := 1; i <= queueOrders; i++ {
		n := perOrder[orderID(d.run, i)]
		shipments += n
		if n != 1 {
			wrong = append(wrong, fmt.Sprintf("%s shipped %d times", orderID(d.run, i), n))
		}
	}
	duplicates := deliveries - q.runs - q.failures
	obs := fmt.Sprintf("%d orders, %d publishes, %d stored (JetStream dropped %d same-ID retries); %d deliveries, %d redelivered after %s died between commit and ack, %d acked as duplicates; %d shipments",
		queueOrders, publishes, stored, uint64(publishes)-stored, deliveries, redeliveries, dead, duplicates, shipments)
	switch {
	case len(wrong) > 0:
		return obs, fmt.Errorf("the ledger is wrong: %v", wrong)
	case shipments != queueOrders:
		return obs, fmt.Errorf("the ledger is wrong: %d shipments for %d orders", shipments, queueOrders)
	case stored != queueOrders+queueOrders/5:
		return obs, fmt.Errorf("the stream holds %d messages, want %d: the same-ID retries were not all dropped", stored, queueOrders+queueOrders/5)
	case len(q.deliveries) != int(stored):
		return obs, fmt.Errorf("%d of the %d stored messages were delivered", len(q.deliveries), stored)
	case redeliveries == 0:
		return obs, errors.New("nothing was redelivered: the dead consumer's message was acked")
	}
	return obs, nil
}

// summary is what the consumers have seen so far.
func (q *queueRun) summary() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return fmt.Sprintf("%d messages delivered, %d handler runs, %d failed", len(q.deliveries), q.runs, q.failures)
}

func orderID(run string, i int) string { return fmt.Sprintf("ord-%s-%04d", run, i) }

// publishOrders publishes the orders as a publisher that retries would:
// each message carries its order's ID in its metadata and its own UUID as
// its Nats-Msg-Id. Every third publish is retried at once with the same
// message (its ack was lost): JetStream's duplicate window drops the copy.
// Every fifth order is published again later under a new UUID (the
// publisher restarted and re-sent its outbox): JetStream stores it as a
// new message, and idem, which identifies messages by order ID, ships the
// order once. It returns how many publishes it made.
func publishOrders(url, topic, run string) (int, error) {
	pub, err := wmnats.NewPublisher(wmnats.PublisherConfig{
		URL:         url,
		NatsOptions: []nats.Option{nats.Name("idemdemo-publisher")},
		JetStream:   wmnats.JetStreamConfig{TrackMsgId: true},
	}, watermill.NopLogger{})
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	newMessage := func(i int) (*message.Message, error) {
		payload, err := json.Marshal(order{OrderID: orderID(run, i), SKU: fmt.Sprintf("sku-%d", 100+i%7), Qty: 1 + i%3})
		if err != nil {
			return nil, err
		}
		msg := message.NewMessage(watermill.NewUUID(), payload)
		msg.Metadata.Set("order_id", orderID(run, i))
		return msg, nil
	}
	publishes := 0
	publish := func(msg *message.Message) error {
		publishes++
		return pub.Publish(topic, msg)
	}
	var resend []int
	for i := 1; i <= queueOrders; i++ {
		msg, err := newMessage(i)
		if err != nil {
			return publishes, err
		}
		if err := publish(msg); err != nil {
			return publishes, err
		}
		if i%3 == 0 {
			if err := publish(msg); err != nil {
				return publishes, err
			}
		}
		if i%5 == 0 {
			resend = append(resend, i)
		}
	}
	for _, i := range resend {
		msg, err := newMessage(i)
		if err != nil {
			return publishes, err
		}
		if err := publish(msg); err != nil {
			return publishes, err
		}
	}
	return publishes, nil
}

// shipmentsPerOrder counts the shipment rows of this run, per order.
func (d *demo) shipmentsPerOrder(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		OrderID string `bun:"order_id"`
		N       int    `bun:"n"`
	}
	err := d.db.NewSelect().Model((*Shipment)(nil)).Column("order_id").ColumnExpr("count(*) AS n").
		Where("order_id LIKE ?", "ord-"+d.run+"-%").Group("order_id").Scan(ctx, &rows)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.OrderID] = r.N
	}
	return out, nil
}
