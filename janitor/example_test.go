package janitor_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite"

	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// A Store runs its Janitor from New until Close. With a lock in Redis, one
// instance of the service's N sweeps at a time.
func Example() {
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
	if err := layer.Init(context.Background()); err != nil {
		log.Fatal(err)
	}
	mr := miniredis.NewMiniRedis() // a real Redis in production
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	j, err := janitor.New(layer, janitor.WithLock(rdb))
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(layer), tiered.WithJanitor(j))
	if err != nil {
		log.Fatal(err)
	}
	// … the service runs; at shutdown Close stops the janitor too:
	fmt.Println("closed:", store.Close())
	// Output:
	// closed: <nil>
}
