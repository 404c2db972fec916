package main

import (
	"context"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/pgxsqlc/db"
	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/tiered"
)

func main() {
	if err := run(context.Background(), os.Getenv("DATABASE_URL"), ":8080"); err != nil {
		log.Fatal(err)
	}
}

// run serves the payments service on addr, over the database dsn names.
func run(ctx context.Context, dsn, addr string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	sql, err := idempgx.New(pool) // idem's SQL tier, on the team's pool
	if err != nil {
		return err
	}
	defer func() { _ = sql.Close() }()
	if err := sql.Init(ctx); err != nil { // or apply sqllayer.DDL in the migrations
		return err
	}
	store, err := tiered.New(tiered.WithSQL(sql))
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	s := &service{pool: pool, queries: db.New(pool), sql: sql}
	router, err := s.newRouter(store, false)
	if err != nil {
		return err
	}
	return http.ListenAndServe(addr, router)
}
