package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// chargeServer is an idem-guarded service that counts its executions.
func chargeServer(runs *atomic.Int64) (*httptest.Server, func()) {
	layer, _ := memlayer.New()
	store, _ := tiered.New(tiered.WithSQL(layer))
	srv := httptest.NewServer(mount(nil, store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":"ch_%d"}`, n)
	})))
	return srv, func() { srv.Close(); _ = store.Close() }
}

// loseFirstAnswer is a network that delivers the first request and loses
// its answer: the server charged, the client never heard.
type loseFirstAnswer struct{ lost atomic.Bool }

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		_ = resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// The answer of the first attempt is lost; the retry carries the same key
// and receives the stored answer: one charge.
func ExampleTransport() {
	var runs atomic.Int64
	srv, stop := chargeServer(&runs)
	defer stop()

	t, err := client.New(&loseFirstAnswer{}, client.WithReplayMarker("Idempotent-Replayed"))
	if err != nil {
		panic(err)
	}
	c := &http.Client{Transport: t}
	ctx := client.ContextWithKey(context.Background(), "order-1042")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	o, _ := client.OutcomeOf(resp)
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println("attempts:", o.Attempts, "replayed:", o.Replayed, "executions:", runs.Load())
	// Output:
	// 201 {"charge":"ch_1"}
	// attempts: 2 replayed: true executions: 1
}

// The same key with another payload is a client error that no retry
// fixes: Check makes it a typed error.
func ExampleCheck() {
	var runs atomic.Int64
	srv, stop := chargeServer(&runs)
	defer stop()
	c, _ := client.NewClient(nil)
	ctx := client.ContextWithKey(context.Background(), "order-1043")
	for _, body := range []string{`{"amount":100}`, `{"amount":999}`} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			panic(err)
		}
		err = client.Check(resp)
		_ = resp.Body.Close()
		o, _ := client.OutcomeOf(resp)
		fmt.Println(resp.StatusCode, errors.Is(err, idem.ErrMismatch), o.Attempts)
	}
	// Output:
	// 201 false 1
	// 422 true 1
}
