package middleware_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// A retry with the same key gets the first response, and the handler runs
// once. Real services put Redis and SQL layers in the Store.
func Example() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	runs := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Location", "/payments/1")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":1,"run":%d}`, runs)
	})
	// One client here: a service with several says whose key it is
	// (WithScope, ScopeFromContext).
	mw, err := middleware.New(store, middleware.WithSingleTenant())
	if err != nil {
		log.Fatal(err)
	}
	h := mw(pay)
	// post sends a payment with its idempotency key and prints the answer.
	post := func(path, key, body string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}

	post("/payments", "order-7", `{"amount":100}`)
	post("/payments", `"order-7"`, `{"amount": 100, "request_id": "retry-2"}`)
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 /payments/1 {"id":1,"run":1}
	// 201 /payments/1 {"id":1,"run":1}
	// handler runs: 1
}

// chi takes the middleware as it is. A key reused for a different request
// is answered 422 with an RFC 9457 problem, never with the other response.
func ExampleNew_chi() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// The authentication middleware puts the caller's account in the
	// context; idem binds every key to it.
	type accountKey struct{}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			account := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer acct-token-")
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, account)))
		})
	}
	mw, err := middleware.New(store, middleware.WithScope(middleware.ScopeFromContext(accountKey{})))
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(authenticate, mw)
	r.Post("/payments", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/payments/1")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":1}`)
	})
	// post sends a payment with its idempotency key and prints the answer.
	post := func(path, key, body string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acct-token-42")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}

	post("/payments", "order-7", `{"amount":100}`)
	post("/payments", "order-7", `{"amount":999}`)
	// Output:
	// 201 /payments/1 {"id":1}
	// 422  {"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemMismatch","title":"Idempotency key reused","status":422,"detail":"This idempotency key was used for a different request."}
}

func ExampleParseKeyHeader() {
	for _, v := range []string{`abc`, `"abc"`, `"a\"b"`, `a, b`} {
		k, err := middleware.ParseKeyHeader([]string{v})
		fmt.Printf("%-7s -> %q %v\n", v, k, err)
	}
	// Output:
	// abc     -> "abc" <nil>
	// "abc"   -> "abc" <nil>
	// "a\"b"  -> "a\"b" <nil>
	// a, b    -> "" middleware: malformed idempotency key: comma at 1 in a bare key (send it quoted)
}
