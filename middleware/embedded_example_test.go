package middleware_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the SQLite driver, pure Go

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The whole stack in one process, with nothing to install: SQLite decides,
// an embedded Redis (miniredis) answers duplicates fast. In production the
// same code takes a real Redis and Postgres or MariaDB.
func Example_embedded() {
	ctx := context.Background()
	// SQLite in memory: one connection holds the database; wait for its
	// write lock rather than fail (docs/configuration.md for a file).
	sqldb, err := sql.Open("sqlite", "file:idem?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1)
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	sqlLayer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlLayer.Init(ctx); err != nil { // creates idem's tables
		log.Fatal(err)
	}

	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	redisLayer, err := redislayer.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer redisLayer.Close()

	store, err := tiered.New(tiered.WithRedis(redisLayer), tiered.WithSQL(sqlLayer))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	// A key belongs to its caller: the principal your authentication finds
	// (a user or account id, never the token, which rotates). No principal
	// (""): the request is refused with a 401 problem.
	users := map[string]string{"Bearer token-of-alice": "alice", "Bearer token-of-bob": "bob"}
	mw, err := middleware.New(store,
		middleware.WithScope(func(r *http.Request) string { return users[r.Header.Get("Authorization")] }),
		middleware.WithReplayMarker("Idempotent-Replayed"))
	if err != nil {
		log.Fatal(err)
	}

	charges := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, charges)
	})
	srv := httptest.NewServer(mw(mux))
	defer srv.Close()

	// Alice pays and retries; Bob happens to send the same key.
	for _, token := range []string{"token-of-alice", "token-of-alice", "token-of-bob"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"charge":1} replayed: false
	// 201 {"charge":1} replayed: true
	// 201 {"charge":2} replayed: false
	// charges: 2
}
