package memlayer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memlayer"
)

// A unit test can drive the layer's clock instead of sleeping.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := memlayer.New(memlayer.WithClock(func() time.Time { return now }))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	key := idem.NewKey("tenant-1", "order-7")

	rec, claimed, _ := l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("first claim:", claimed)

	_, claimed, _ = l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("duplicate claim:", claimed)

	now = now.Add(time.Minute) // the owner crashed; its lease lapsed
	_, claimed, _ = l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("lapsed, owner's grace:", claimed)

	now = now.Add(10 * time.Second) // the grace, a quarter of the lease, lapsed too
	_, claimed, _ = l.Reserve(ctx, key, "fp", 30*time.Second, 24*time.Hour)
	fmt.Println("takeover:", claimed)

	err = l.Complete(ctx, key, rec.Token, []byte("late"), 24*time.Hour)
	fmt.Println("stale owner:", err)
	// Output:
	// first claim: true
	// duplicate claim: false
	// lapsed, owner's grace: false
	// takeover: true
	// stale owner: idem: lease lost
}
