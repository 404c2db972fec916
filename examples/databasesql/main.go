package main

import (
	"context"
	"database/sql"
	"log"
	"net/http"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem/examples/databasesql/db"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

func main() {
	if err := run(context.Background(), os.Getenv("DATABASE_URL"), ":8080"); err != nil {
		log.Fatal(err)
	}
}

// run serves the payments service on addr, over the Postgres database dsn
// names.
func run(ctx context.Context, dsn, addr string) error {
	sqldb, err := sql.Open("pgx", dsn) // the team's *sql.DB, as sqlc's database/sql mode uses it
	if err != nil {
		return err
	}
	defer sqldb.Close()
	s, store, err := newService(ctx, sqldb, bun.NewDB(sqldb, pgdialect.New()), false)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	router, err := s.newRouter(store, false)
	if err != nil {
		return err
	}
	return http.ListenAndServe(addr, router)
}

// newService builds idem's tier on the team's *sql.DB (wrapped in a
// *bun.DB of its dialect, for idem alone: the same pool, no second one),
// creates idem's tables, and returns the service with its Store, atomic
// or not.
func newService(ctx context.Context, sqldb *sql.DB, idemDB *bun.DB, atomic bool) (*service, *tiered.Store, error) {
	layer, err := sqllayer.New(idemDB)
	if err != nil {
		return nil, nil, err
	}
	if err := layer.Init(ctx); err != nil { // or apply sqllayer.DDL in the migrations
		return nil, nil, err
	}
	store, err := tiered.New(tiered.WithSQL(layer), tiered.WithAtomic(atomic))
	if err != nil {
		return nil, nil, err
	}
	return &service{db: sqldb, queries: db.New(sqldb), idem: layer}, store, nil
}
