package middleware_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "idem")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// SQLite: wait for the write lock instead of failing, and let readers
	// run beside the writer.
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "idem.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
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
	// A key is bound to the caller: the principal your authentication
	// finds (a user or account id, never the token, which rotates).
	type userKey struct{}
	users := map[string]string{"token-of-alice": "alice", "token-of-bob": "bob"}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, ok := users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			if !ok {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		})
	}
	mw, err := middleware.New(store,
		middleware.WithScope(middleware.ScopeFromContext(userKey{})),
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
	srv := httptest.NewServer(authenticate(mw(mux)))
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
