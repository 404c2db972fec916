package tiered_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The same intent twice: the work runs once, both calls get its result.
func Example() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	key := idem.NewKey("merchant-7", "order-1001") // scope, client key
	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte(`{"charge":"ch_1","amount":4200}`), nil
	}
	for range 2 {
		res, err := store.Do(ctx, key, "f1:amount=4200", charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s replayed=%v\n", res.Value, res.Replayed)
	}
	_, err = store.Do(ctx, key, "f1:amount=9900", charge)
	fmt.Println(err)
	// Output:
	// charging the card
	// {"charge":"ch_1","amount":4200} replayed=false
	// {"charge":"ch_1","amount":4200} replayed=true
	// idem: key reused with a different request
}

// A queue consumer: a redelivered message is reported as a duplicate; a
// failed one releases its key so the redelivery runs it again.
func ExampleStore_Once() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	msg := idem.NewKey("orders-consumer", "msg-42")
	handle := func(ctx context.Context) error { fmt.Println("shipping order 42"); return nil }
	for range 3 {
		dup, err := store.Once(ctx, msg, handle)
		fmt.Println("duplicate:", dup, "err:", err)
	}
	// Output:
	// shipping order 42
	// duplicate: false err: <nil>
	// duplicate: true err: <nil>
	// duplicate: true err: <nil>
}

// The recommended production setup: Redis answers most duplicates in one
// round trip, Postgres decides.
func ExampleNew() {
	// ContextTimeoutEnabled lets the layers' short deadlines reach the socket.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	// connect_timeout keeps a server that accepts and never answers from
	// stalling the pool's every later connection.
	sqldb, err := sql.Open("pgx", "postgres://app@127.0.0.1:5432/app?connect_timeout=2")
	if err != nil {
		log.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	defer db.Close()

	sqlLayer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlLayer.Init(context.Background()); err != nil { // or apply sqllayer.DDL in your migrations
		log.Fatal(err)
	}
	redisLayer, err := redislayer.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer redisLayer.Close()

	store, err := tiered.New(
		tiered.WithRedis(redisLayer),
		tiered.WithSQL(sqlLayer),
		tiered.WithLease(30*time.Second),   // the default
		tiered.WithRetention(48*time.Hour), // within the published 24–72 h
		tiered.WithWait(10*time.Second),    // the default
		tiered.WithObserver(tiered.LogObserver(slog.Default())),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}

// A readiness probe: ready while the Store can decide, with each tier's
// state for operators.
func ExampleStore_Check() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	readyz := func(w http.ResponseWriter, r *http.Request) {
		report, err := store.Check(r.Context())
		status := http.StatusOK
		if err != nil {
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		for _, t := range report.Tiers {
			state := "ok"
			if t.Err != nil {
				state = t.Err.Error()
			}
			fmt.Fprintf(w, "%s: %s\n", t.Tier, state)
		}
	}
	rec := httptest.NewRecorder()
	readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 sql: ok
}
