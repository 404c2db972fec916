package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// The answer is cut after the handler committed: the retry, to another
// instance, receives the stored answer, and the handler ran once.
func TestAnswerCutAfterCommit(t *testing.T) {
	c := newCluster(t, realStack(t))
	c.each(func(p *faultproxy.Proxy) { p.DropReplies(true) })
	hc := c.client(t, func(a client.Attempt) {
		if a.Number == 2 {
			c.clean()
		}
	})
	key := testenv.Name("cut")
	got := charge(t.Context(), hc, key, `{"amount":100}`)
	c.wantOnce(t, key, got)
	if got.outcome.Attempts != 2 || !got.outcome.Replayed {
		t.Fatalf("outcome %+v: want 2 attempts, the second a replay", got.outcome)
	}
}

// The connection is reset before the request reached any server: the
// retry runs the handler, once.
func TestResetBeforeServer(t *testing.T) {
	c := newCluster(t, realStack(t))
	c.each(func(p *faultproxy.Proxy) { p.RefuseNew(true) })
	hc := c.client(t, func(a client.Attempt) {
		if a.Number == 2 {
			c.clean()
		}
	})
	key := testenv.Name("reset")
	got := charge(t.Context(), hc, key, `{"amount":100}`)
	c.wantOnce(t, key, got)
	if got.outcome.Attempts != 2 || got.outcome.Replayed {
		t.Fatalf("outcome %+v: want 2 attempts, the second the first execution", got.outcome)
	}
}

// A handler slower than the client's attempt timeout: the client abandons
// the attempt and retries with the same key; the retry waits for the
// execution in flight, or comes again, and receives its answer.
func TestSlowerThanAttemptTimeout(t *testing.T) {
	c := newCluster(t, realStack(t))
	c.slow = make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c.slow) }) }
	t.Cleanup(release)
	var mu sync.Mutex
	var causes []error
	hc := c.client(t, func(a client.Attempt) {
		mu.Lock()
		causes = append(causes, a.Cause)
		mu.Unlock()
		if a.Number == 2 {
			release() // the first attempt timed out: let the execution finish
		}
	}, client.WithAttemptTimeout(300*time.Millisecond), client.WithAttempts(20))
	key := testenv.Name("slow")
	got := charge(t.Context(), hc, key, `{"amount":100}`)
	c.wantOnce(t, key, got)
	mu.Lock()
	defer mu.Unlock()
	if len(causes) < 2 || !errors.Is(causes[1], client.ErrAttemptTimeout) {
		t.Fatalf("causes %v: want the first attempt timed out", causes)
	}
	for _, cause := range causes[1:] {
		if !errors.Is(cause, client.ErrAttemptTimeout) && !errors.Is(cause, idem.ErrInFlight) {
			t.Fatalf("cause %v: want only timeouts and in-flight answers", cause)
		}
	}
}

// 409 while the first request is in flight, with Retry-After: the client
// waits at least that long, comes again, and receives the answer.
func TestInFlightRetryAfter(t *testing.T) {
	c := newCluster(t, realStack(t), tiered.WithWait(50*time.Millisecond))
	c.slow = make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c.slow) }) }
	t.Cleanup(release)
	var mu sync.Mutex
	var seen []client.Attempt
	hc := c.client(t, func(a client.Attempt) {
		mu.Lock()
		seen = append(seen, a)
		mu.Unlock()
		var p *client.Problem
		if errors.As(a.Cause, &p) && p.Code == client.CodeInFlight {
			release() // the duplicate was told to come back: let the first finish
		}
	}, client.WithAttempts(10))
	key := testenv.Name("inflight")
	done := make(chan result, 1)
	go func() { done <- charge(t.Context(), hc, key, `{"amount":100}`) }()
	<-c.started                                        // the first execution holds the key
	c.each(func(p *faultproxy.Proxy) { p.ResetAll() }) // its client loses the connection
	got := <-done
	c.wantOnce(t, key, got)
	mu.Lock()
	defer mu.Unlock()
	honoured := false
	for _, a := range seen {
		var p *client.Problem
		if errors.As(a.Cause, &p) && p.Code == client.CodeInFlight {
			if p.RetryAfter <= 0 || a.Wait < p.RetryAfter {
				t.Fatalf("attempt %d waited %v after a 409 with Retry-After %v", a.Number, a.Wait, p.RetryAfter)
			}
			honoured = true
		}
	}
	if !honoured {
		t.Fatalf("attempts %+v: want a 409 in flight among the causes", seen)
	}
}

// The key reused with another payload: 422, a typed error, no retry, and
// the first operation's execution stays the only one.
func TestMismatchNotRetried(t *testing.T) {
	c := newCluster(t, realStack(t))
	hc := c.client(t, nil)
	key := testenv.Name("mismatch")
	c.wantOnce(t, key, charge(t.Context(), hc, key, `{"amount":100}`))
	req, _ := http.NewRequestWithContext(client.ContextWithKey(t.Context(), key), http.MethodPost, "http://service/charges", strings.NewReader(`{"amount":999}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	perr := client.Check(resp)
	var p *client.Problem
	if resp.StatusCode != 422 || !errors.As(perr, &p) || p.Code != client.CodeMismatch || !errors.Is(perr, idem.ErrMismatch) {
		t.Fatalf("%d, %v: want 422 and a mismatch", resp.StatusCode, perr)
	}
	if o, _ := client.OutcomeOf(resp); o.Attempts != 1 {
		t.Fatalf("%d attempts, want 1", o.Attempts)
	}
	c.wantOnce(t, key, result{status: 201, body: c.answer(key)})
}

// Redis, a server of the test's own, is killed in the middle of a burst of
// operations: SQL decides alone; every operation runs once and receives
// its answer.
func TestRedisKilledMidBurst(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	st := stacktest.On(t, "own-redis", &testenv.Redis{Options: srv.Options()}, testenv.Postgres(t))
	c := newCluster(t, st)
	hc := c.client(t, nil, client.WithAttempts(10))
	const n = 30
	keys := make([]string, n)
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range keys {
		keys[i] = testenv.Name("burst")
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = charge(t.Context(), hc, keys[i], `{"amount":1}`)
		}()
	}
	for range n / 3 {
		<-c.started // a third of the executions began
	}
	srv.Kill()
	wg.Wait()
	// Up again before the Stores close: go-redis's pool keeps redialling a
	// dead server for a second after its Close.
	srv.Restart()
	for i, k := range keys {
		c.wantOnce(t, k, results[i])
	}
}

// Answers written in Stripe's shape (middleware.WriteStripeError) are read
// as idem's problems too, and a 422 is not retried.
func TestStripeShapedProblem(t *testing.T) {
	store, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	srv := httptest.NewServer(mount(t, store, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}), middleware.WithErrorWriter(middleware.WriteStripeError)))
	t.Cleanup(srv.Close)
	t.Cleanup(fresh.CloseIdleConnections)
	tr, err := client.New(fresh)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	for i, body := range []string{`{"a":1}`, `{"a":2}`} {
		req, _ := http.NewRequestWithContext(client.ContextWithKey(t.Context(), "stripe-shape"), http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		perr := client.Check(resp)
		_ = resp.Body.Close()
		o, _ := client.OutcomeOf(resp)
		switch {
		case i == 0 && (resp.StatusCode != 201 || perr != nil):
			t.Fatalf("first: %d, %v", resp.StatusCode, perr)
		case i == 1 && (resp.StatusCode != 422 || !errors.Is(perr, idem.ErrMismatch) || o.Attempts != 1):
			t.Fatalf("payload changed: %d, %v, %d attempts", resp.StatusCode, perr, o.Attempts)
		}
	}
}
