package redislayer_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redislayer"
)

// A first request claims the key and its duplicate replays the result. The
// embedded miniredis stands in for a real server.
func Example() {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	l, err := redislayer.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	key := idem.NewKey("tenant-1", "order-7")

	rec, claimed, _ := l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("first:", claimed, rec.State)

	dup, claimed, _ := l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("duplicate while working:", claimed, dup.State, dup.Token == "")

	_ = l.Complete(ctx, key, rec.Token, []byte("charged 42"), 24*time.Hour)
	dup, claimed, _ = l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("duplicate after:", claimed, dup.State, string(dup.Result))

	other, _, _ := l.Reserve(ctx, key, "another fingerprint", 30*time.Second, 24*time.Hour)
	fmt.Println("mismatch:", other.Fingerprint != "another fingerprint")
	// Output:
	// first: true in_progress
	// duplicate while working: false in_progress true
	// duplicate after: false completed charged 42
	// mismatch: true
}

// A duplicate on another instance waits for the owner's result instead of
// polling: the owner's Complete publishes on the key's channel.
func ExampleLayer_Wait() {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	key := idem.NewKey("tenant-1", "order-8")

	ownerClient := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer ownerClient.Close()
	owner, err := redislayer.New(ownerClient)
	if err != nil {
		log.Fatal(err)
	}
	defer owner.Close()
	waiterClient := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer waiterClient.Close()
	waiter, err := redislayer.New(waiterClient)
	if err != nil {
		log.Fatal(err)
	}
	defer waiter.Close()

	rec, _, _ := owner.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	go func() {
		time.Sleep(50 * time.Millisecond) // the work
		_ = owner.Complete(ctx, key, rec.Token, []byte("shipped"), 24*time.Hour)
	}()

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, werr := waiter.Wait(wctx, key)
	fmt.Println(string(got.Result), werr)
	// Output:
	// shipped <nil>
}

// When SQL decided that the work is done, Fill copies its record into Redis
// so that the next duplicate is answered from Redis.
func ExampleLayer_Fill() {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	l, err := redislayer.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	key := idem.NewKey("tenant-1", "order-9")
	fromSQL := idem.Record{Key: key, Fingerprint: "fp", State: idem.StateCompleted, Result: []byte("refunded")}
	err = l.Fill(ctx, fromSQL, 24*time.Hour)

	rec, claimed, _ := l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println(err, claimed, string(rec.Result))
	// Output:
	// <nil> false refunded
}

// A layer over a real server, with the settings that keep a sick Redis from
// holding requests: whoever calls the layer bounds each call with its
// context (a tiered.Store does, with WithTimeouts), and go-redis honours
// that deadline only with ContextTimeoutEnabled.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	l, err := redislayer.New(client, redislayer.WithPrefix("shop:idem:"))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = l.Reserve(ctx, idem.NewKey("tenant-1", "order-10"), "fp", 30*time.Second, 24*time.Hour)
	if errors.Is(err, idem.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("Redis is down or slow: let SQL decide")
	}
}

// A layer over a Redis Cluster: every key of one idempotency key shares a
// hash tag, so each script runs on one node.
func ExampleNew_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	l, err := redislayer.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}
