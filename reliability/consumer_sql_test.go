//go:build unix

package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// sqlDelivery is one delivery a Watermill-over-Postgres subscriber made.
type sqlDelivery struct {
	sub       int
	id        string
	ran       bool
	committed bool
	err       error
}

// TestConsumerWatermillSQL: Watermill over Postgres (watermill-sql, its
// Postgres schema and offsets adapters) as a second real transport. Three
// subscribers in one consumer group, each a router behind idemwatermill
// over a Store of its own, take the messages of one topic; a fifth of the
// first deliveries fail (the subscriber redelivers them), and one
// subscriber is closed while its handler runs a message, which the group
// then delivers to another while the first handler still holds the key.
// The ledger has one effect per message, every message is acked, and
// every delivery after the effect is a duplicate acked without effect (or
// nacked while the key was held). Needs the real Postgres.
func TestConsumerWatermillSQL(t *testing.T) {
	pg := testenv.Postgres(t)
	st := stacktest.On(t, "real", testenv.AnyRedis(t), pg)
	if st.Redis.Mini != nil {
		st.Redis.Mini.ClockTTL(true)
	}
	admin := st.DB(t)
	ledger := testenv.Name("ledger")
	topic := testenv.Name("orders")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE TABLE "+ledger+" (msg_id TEXT NOT NULL, sub BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range []string{ledger, "watermill_" + topic, "watermill_offsets_" + topic} {
			_, _ = admin.ExecContext(ctx, `DROP TABLE IF EXISTS "`+table+`"`)
		}
	})
	sqldb := pg.Open(t).DB
	sqldb.SetMaxOpenConns(8)
	logger := watermill.NopLogger{}

	pub := must.Get(wmsql.NewPublisher(wmsql.BeginnerFromStdSQL(sqldb),
		wmsql.PublisherConfig{SchemaAdapter: wmsql.DefaultPostgreSQLSchema{}, AutoInitializeSchema: true}, logger))(t)
	defer pub.Close()

	const n = 150
	const held = "sql-held"
	var (
		mu       sync.Mutex
		log      []sqlDelivery
		attempts = map[string]int{}
	)
	holding := make(chan int, 1)     // the subscriber whose handler holds the message
	release := make(chan struct{})   // lets the held handler go on
	heldAgain := make(chan struct{}) // another subscriber took the held message
	var heldOnce, againOnce sync.Once
	var heldBy atomic.Int64 // the subscriber whose handler holds it, or -1
	heldBy.Store(-1)

	type subscriber struct {
		router *message.Router
		sub    *wmsql.Subscriber
		store  *tiered.Store
	}
	var subs []*subscriber
	for i := range 3 {
		db := st.DB(t)
		layer := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions)))(t)
		store := must.Get(tiered.New(tiered.WithSQL(layer), tiered.WithRedis(st.RedisLayer(t)),
			tiered.WithLease(2*time.Second), tiered.WithWait(time.Second), tiered.WithTimeouts(time.Second, 10*time.Second)))(t)
		mw := must.Get(idemwatermill.New(store, idemwatermill.WithConsumer("ledger"), idemwatermill.WithIdentity(idemwatermill.Metadata(mdEventID))))(t)
		sub := must.Get(wmsql.NewSubscriber(wmsql.BeginnerFromStdSQL(sqldb), wmsql.SubscriberConfig{
			ConsumerGroup: "ledger", SchemaAdapter: wmsql.DefaultPostgreSQLSchema{}, OffsetsAdapter: wmsql.DefaultPostgreSQLOffsetsAdapter{},
			InitializeSchema: true, PollInterval: 20 * time.Millisecond, ResendInterval: 20 * time.Millisecond,
		}, logger))(t)
		router := must.Get(message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, logger))(t)
		logged := func(h message.HandlerFunc) message.HandlerFunc {
			return func(msg *message.Message) ([]*message.Message, error) {
				d := &sqlDelivery{sub: i, id: msg.Metadata.Get(mdEventID)}
				if by := heldBy.Load(); d.id == held && by >= 0 && by != int64(i) {
					againOnce.Do(func() { close(heldAgain) })
				}
				out, err := h(withDelivery(msg, d))
				mu.Lock()
				d.err = err
				log = append(log, *d)
				mu.Unlock()
				return out, err
			}
		}
		router.AddMiddleware(logged, mw)
		router.AddConsumerHandler(fmt.Sprintf("sub-%d", i), topic, sub, func(msg *message.Message) error {
			// The handler runs on the Store's execution, which outlives a
			// delivery whose context ends (its subscriber closed): d is
			// shared with the delivery's middleware under mu.
			d := deliveryOf(msg)
			mu.Lock()
			d.ran = true
			mu.Unlock()
			var p consumerPayload
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				return err
			}
			mu.Lock()
			attempts[p.ID]++
			first := attempts[p.ID] == 1
			mu.Unlock()
			if p.FailFirst && first {
				return errors.New("the first delivery fails")
			}
			if p.Hold {
				heldOnce.Do(func() {
					heldBy.Store(int64(i))
					holding <- i
					<-release
				})
			}
			err := db.RunInTx(msg.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+ledger+" (msg_id, sub) VALUES (?, ?)", p.ID, i); err != nil {
					return err
				}
				return idemwatermill.Complete(ctx, tx, layer)
			})
			mu.Lock()
			d.committed = err == nil
			mu.Unlock()
			return err
		})
		s := &subscriber{router: router, sub: sub, store: store}
		subs = append(subs, s)
		go func() { _ = router.Run(context.Background()) }()
		<-router.Running()
	}
	defer func() {
		for _, s := range subs {
			_ = s.router.Close()
			_ = s.store.Close()
		}
	}()

	var ids []string
	for k := range n {
		p := consumerPayload{ID: fmt.Sprintf("sql-%03d", k+1), FailFirst: k%5 == 0}
		if k == n/3 {
			p = consumerPayload{ID: held, Hold: true}
		}
		b, _ := json.Marshal(p)
		m := message.NewMessage(watermill.NewUUID(), b)
		m.Metadata.Set(mdEventID, p.ID)
		if err := pub.Publish(topic, m); err != nil {
			t.Fatalf("publish: %v", err)
		}
		ids = append(ids, p.ID)
	}

	// The held message's subscriber is closed mid-handler: the group
	// delivers the message to another subscriber, which finds the key held.
	var victim int
	select {
	case victim = <-holding:
	case <-time.After(2 * time.Minute):
		t.Fatal("no subscriber ran the held message within two minutes")
	}
	if err := subs[victim].sub.Close(); err != nil {
		t.Logf("close subscriber %d: %v", victim, err)
	}
	select {
	case <-heldAgain:
	case <-time.After(2 * time.Minute):
		t.Fatal("no other subscriber took the held message within two minutes")
	}
	close(release)

	effects := func() map[string]int {
		rows, err := admin.QueryContext(context.Background(), "SELECT msg_id FROM "+ledger)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[id]++
		}
		return out
	}
	acked := func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for _, d := range log {
			if d.err == nil {
				out[d.id] = true
			}
		}
		return out
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(acked()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages acked after three minutes", len(acked()), n)
		}
		time.Sleep(20 * time.Millisecond) // until the subscribers ack
	}

	var anomalies []string
	eff := effects()
	for _, id := range ids {
		if eff[id] != 1 {
			anomalies = append(anomalies, fmt.Sprintf("%s: %d effects", id, eff[id]))
		}
	}
	mu.Lock()
	var dupAcked, nacked, redelivered int
	seen := map[string]int{}
	for _, d := range log {
		seen[d.id]++
		switch {
		case d.err != nil:
			nacked++
		case !d.ran:
			dupAcked++
		case !d.committed:
			anomalies = append(anomalies, fmt.Sprintf("%s: acked on subscriber %d after running the handler without its effect", d.id, d.sub))
		}
	}
	for _, c := range seen {
		if c > 1 {
			redelivered++
		}
	}
	deliveries := len(log)
	mu.Unlock()
	var completed int
	// Its own bound: the setup's context may have run out on a loaded
	// machine, whose run takes minutes.
	readCtx, cancelRead := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelRead()
	if err := admin.QueryRowContext(readCtx, "SELECT count(*) FROM "+st.Records+" WHERE state = ?", int(idem.StateCompleted)).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if completed != n {
		anomalies = append(anomalies, fmt.Sprintf("%d keys completed, want %d", completed, n))
	}
	t.Logf("watermill-sql: %d messages, %d deliveries, %d redelivered (ratio %.3f), %d effects, %d duplicates acked without effect, %d nacks, %d anomalies; subscriber %d closed mid-handler",
		n, deliveries, redelivered, float64(redelivered)/n, len(eff), dupAcked, nacked, len(anomalies), victim)
	if len(anomalies) > 0 {
		t.Fatalf("anomalies:\n%s", strings.Join(anomalies, "\n"))
	}
	var heldDup bool
	mu.Lock()
	for _, d := range log {
		heldDup = heldDup || (d.id == held && d.sub != victim && (d.err != nil || !d.ran))
	}
	mu.Unlock()
	if !heldDup {
		t.Fatal("no other subscriber met the held message as a duplicate")
	}
}

type deliveryKey struct{}

func withDelivery(msg *message.Message, d *sqlDelivery) *message.Message {
	msg.SetContext(context.WithValue(msg.Context(), deliveryKey{}, d))
	return msg
}

func deliveryOf(msg *message.Message) *sqlDelivery {
	d, _ := msg.Context().Value(deliveryKey{}).(*sqlDelivery)
	if d == nil {
		return &sqlDelivery{}
	}
	return d
}
