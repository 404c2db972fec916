package janitor_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A Store runs its Janitor from New until Close: it sweeps at once, then
// every interval. With a lock in Redis, one instance of the service's N
// sweeps at a time. Here a record kept for a millisecond has expired when
// the Store starts, and the first sweep deletes it; the one kept for a day
// stays.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idem-janitor")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "idem.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	layer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	mr := miniredis.NewMiniRedis() // a real Redis in production
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	// Two completed records: one kept for a millisecond, one for a day.
	for _, r := range []struct {
		id        string
		retention time.Duration
	}{{"order-1", time.Millisecond}, {"order-2", 24 * time.Hour}} {
		key := idem.NewKey("shop", r.id)
		rec, _, err := layer.Reserve(ctx, key, "fp", 30*time.Second, r.retention)
		if err != nil {
			log.Fatal(err)
		}
		if err := layer.Complete(ctx, key, rec.Token, []byte("done"), r.retention); err != nil {
			log.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // order-1 expires

	swept := make(chan int64, 1)
	j, err := janitor.New(layer, janitor.WithLock(rdb))
	if err != nil {
		log.Fatal(err)
	}
	// The Store hands its observer to the janitor it runs.
	store, err := tiered.New(tiered.WithSQL(layer), tiered.WithJanitor(j),
		tiered.WithObserver(idem.ObserverFunc(func(_ context.Context, e idem.Event) {
			if e.Kind == idem.EventSwept {
				select {
				case swept <- e.N: // the first sweep's count
				default:
				}
			}
		})))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("expired records deleted:", <-swept)
	kept, err := layer.Get(ctx, idem.NewKey("shop", "order-2"))
	fmt.Println("order-2:", kept.State, err)
	// … the service runs; at shutdown Close stops the janitor too:
	fmt.Println("closed:", store.Close())
	// Output:
	// expired records deleted: 1
	// order-2: completed <nil>
	// closed: <nil>
}
