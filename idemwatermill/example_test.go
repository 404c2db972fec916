package idemwatermill_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A router whose handler runs each message once: the broker's redelivery
// of order-7 is acknowledged without running the handler.
func ExampleNew() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	pubsub := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	defer pubsub.Close()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idemwatermill.New(store)
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{}, 3)
	// Only to end the example once the three deliveries are acknowledged.
	router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			defer func() { done <- struct{}{} }()
			return h(msg)
		}
	})
	router.AddMiddleware(mw)
	router.AddConsumerHandler("ship", "orders", pubsub, func(msg *message.Message) error {
		fmt.Printf("shipping %s\n", msg.Payload)
		return nil
	})
	go func() {
		if err := router.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
	}()
	<-router.Running()
	defer router.Close()

	order7 := message.NewMessage(watermill.NewUUID(), []byte("order-7"))
	order8 := message.NewMessage(watermill.NewUUID(), []byte("order-8"))
	for _, msg := range []*message.Message{order7, order7.Copy(), order8} { // order-7 is redelivered
		if err := pubsub.Publish("orders", msg); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		<-done
	}
	// Unordered output:
	// shipping order-7
	// shipping order-8
}

// The shipment row and the processed mark commit in one transaction: a
// worker that dies after the commit and before its ack causes no second
// shipment, and a transaction that fails processes nothing (the message is
// nacked and redelivered). Here the wrapped handler is called as a router
// calls it, once per delivery.
func ExampleComplete() {
	ctx := context.Background()
	// An in-memory database belongs to its connection, so the pool keeps
	// exactly one; a file database, with _pragma=journal_mode(WAL) added to
	// the DSN, needs no such limit.
	sqldb, err := sql.Open("sqlite", "file:example_watermill?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE shipments (order_id TEXT)"); err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(layer))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	mw, err := idemwatermill.New(store, idemwatermill.WithConsumer("shipping"))
	if err != nil {
		log.Fatal(err)
	}
	handler := mw(func(msg *message.Message) ([]*message.Message, error) {
		shipped := message.NewMessage(watermill.NewUUID(), append([]byte("shipped "), msg.Payload...))
		err := db.RunInTx(msg.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES (?)", string(msg.Payload)); err != nil {
				return err
			}
			return idemwatermill.Complete(ctx, tx, layer, shipped)
		})
		return []*message.Message{shipped}, err
	})

	msg := message.NewMessage("msg-1", []byte("order-7"))
	var uuids []string
	for range 2 { // delivered, then redelivered
		out, err := handler(msg.Copy())
		fmt.Println("produced:", len(out), "err:", err)
		for _, m := range out {
			uuids = append(uuids, m.UUID)
		}
	}
	// The redelivery runs nothing and returns the recorded message again,
	// under its UUID: published at least once, deduplicated downstream.
	fmt.Println("same UUID:", len(uuids) == 2 && uuids[0] == uuids[1])
	var n int
	if err := db.NewRaw("SELECT count(*) FROM shipments").Scan(ctx, &n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shipments:", n)
	// Output:
	// produced: 1 err: <nil>
	// produced: 1 err: <nil>
	// same UUID: true
	// shipments: 1
}
