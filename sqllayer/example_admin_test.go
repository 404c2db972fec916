package sqllayer_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqllayer"
)

// An operator frees a claim its owner left behind: read it with its token,
// release it by compare-and-set, and the release is in the audit table.
// A service mounts the same calls behind its own admin authentication.
func ExampleLayer_Admin() {
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", "file:example-admin?mode=memory&_pragma=busy_timeout(5000)")
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
	admin := layer.Admin()
	if err := layer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if err := admin.Init(ctx); err != nil { // the audit table
		log.Fatal(err)
	}
	key := idem.NewKey("tenant-42", "order-1001")
	if _, _, err := layer.Reserve(ctx, key, "fp-1", 30*time.Second, 24*time.Hour); err != nil {
		log.Fatal(err) // an owner claims the key, then dies
	}

	stuck, err := admin.Stuck(ctx, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	e := stuck[0]
	fmt.Println(e.Scope, e.ClientKey, e.State)
	out, err := admin.Release(ctx, e, sqllayer.Note{By: "oncall", Reason: "owner pod killed"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	trail, err := admin.Trail(ctx, key, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(trail[0].By, trail[0].Action, trail[0].Outcome, trail[0].Reason)
	_, claimed, err := layer.Reserve(ctx, key, "fp-1", 30*time.Second, 24*time.Hour)
	fmt.Println(claimed, err)
	// Output:
	// tenant-42 order-1001 in_progress
	// freed
	// oncall release freed owner pod killed
	// true <nil>
}
