package middleware_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The reservation in the handler's transaction: the charge and idem's
// record commit together, so a response lost after the commit is replayed
// to the retry, and a rollback leaves nothing behind.
func ExampleNew_reservation() {
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", "file:example_reservation?mode=memory&_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	sqldb.SetMaxOpenConns(1) // an in-memory database belongs to its connection
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	sqlLayer, err := sqllayer.New(db)
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlLayer.Init(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE charges (id TEXT PRIMARY KEY, amount INTEGER CHECK (amount > 0))"); err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(sqlLayer))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	// Every key is bound to the caller's account, which authentication
	// puts in the request's context.
	type accountKey struct{}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			account := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer token-of-")
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, account)))
		})
	}
	mw, err := middleware.New(store, middleware.WithScope(middleware.ScopeFromContext(accountKey{})))
	if err != nil {
		log.Fatal(err)
	}

	r := chi.NewRouter()
	r.Use(authenticate, mw)
	r.Post("/charges", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Amount int }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest) // before taking the reservation: kept
			return
		}
		res, _ := idem.ReservationFrom(r.Context()) // behind the middleware there is one
		err := db.RunInTx(r.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
			id := "ch_" + res.Key().Hex()[:8]
			if _, err := tx.ExecContext(ctx, "INSERT INTO charges (id, amount) VALUES (?, ?)", id, req.Amount); err != nil {
				return err // a constraint, a deadlock, a dropped connection: nothing written yet
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q}`, id)
			return sqlLayer.CompleteReservation(ctx, tx, res, nil) // last: the response is stored as written
		})
		if err != nil {
			log.Print(err) // nothing committed: the middleware answers 500 and the retry runs again
		}
	})
	// post sends a payment with its idempotency key and prints the answer.
	post := func(path, key, body string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer token-of-acct_1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}

	post("/charges", "pay-7", `{"amount":4200}`)
	post("/charges", "pay-7", `{"amount":4200}`) // the retry after a lost response
	// The INSERT fails (the CHECK): the handler logs it and returns without
	// writing. Nothing committed, nothing stored: a 500 problem, and the
	// retry runs the handler again.
	post("/charges", "pay-8", `{"amount":-1}`)
	post("/charges", "pay-8", `{"amount":-1}`)
	var n int
	if err := db.NewRaw("SELECT count(*) FROM charges").Scan(ctx, &n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", n)
	// Output:
	// 201  {"id":"ch_c80b4db9"}
	// 201  {"id":"ch_c80b4db9"}
	// 500  {"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemFailed","title":"Request failed","status":500,"detail":"The request could not be completed."}
	// 500  {"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemFailed","title":"Request failed","status":500,"detail":"The request could not be completed."}
	// charges: 1
}
