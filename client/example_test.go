package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
)

// The first attempt meets a server that is not ready (503); the retry
// carries the same key, so an idem server runs the operation once.
func ExampleTransport() {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"charge":"ch_1"}`)
	}))
	defer srv.Close()

	c, err := client.NewClient(nil)
	if err != nil {
		panic(err)
	}
	ctx := client.ContextWithKey(context.Background(), "order-1042")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":100}`))
	resp, err := c.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	o, _ := client.OutcomeOf(resp)
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println("attempts:", o.Attempts, "keys sent:", keys)
	// Output:
	// 201 {"charge":"ch_1"}
	// attempts: 2 keys sent: [order-1042 order-1042]
}

// The same key with another payload is a client error that no retry
// fixes: Check makes idem's 422 a typed error.
func ExampleCheck() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Idempotency-Should-Retry", "false")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemMismatch",`+
			`"title":"Idempotency key reused","status":422,"detail":"This idempotency key was used for a different request."}`)
	}))
	defer srv.Close()

	c, _ := client.NewClient(nil)
	ctx := client.ContextWithKey(context.Background(), "order-1043")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":999}`))
	resp, err := c.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	err = client.Check(resp)
	o, _ := client.OutcomeOf(resp)
	fmt.Println(resp.StatusCode, errors.Is(err, idem.ErrMismatch), "attempts:", o.Attempts)
	// Output:
	// 422 true attempts: 1
}
