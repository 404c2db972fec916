package client_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/ledger"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// mount builds the middleware of every test of this package: the one place
// that says how the server is configured.
func mount(t testing.TB, store *tiered.Store, h http.Handler, opts ...middleware.Option) http.Handler {
	t.Helper()
	mw, err := middleware.New(store, append([]middleware.Option{middleware.WithSingleTenant(), middleware.WithReplayMarker(replayMarker)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return mw(h)
}

const replayMarker = "Idempotent-Replayed"

// cluster is three instances of one service, each with its own Store over
// one shared Redis and one shared Postgres, each behind a fault proxy; the
// handler counts its executions per key and remembers each answer it made.
type cluster struct {
	proxies [3]*faultproxy.Proxy
	// slow, when set, holds the first execution of every key until it is
	// closed (or the test ends).
	slow    chan struct{}
	started chan string // the key of each execution, as it starts; never blocks

	runs    *ledger.Ledger[string]
	running sync.WaitGroup
	next    atomic.Int64 // the instance the next attempt goes to
}

// newCluster starts the instances on st, with extra Store options.
func newCluster(t *testing.T, st *stacktest.Stack, opts ...tiered.Option) *cluster {
	t.Helper()
	c := &cluster{runs: ledger.New[string](), started: make(chan string, 1024)}
	t.Cleanup(c.running.Wait) // detached executions end before the Stores close
	for i := range c.proxies {
		srv := httptest.NewServer(mount(t, st.Store(t, opts...), http.HandlerFunc(c.charge)))
		t.Cleanup(srv.Close)
		p, err := faultproxy.New(srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c.proxies[i] = p
	}
	return c
}

// charge is the service's handler: one execution makes one new answer.
func (c *cluster) charge(w http.ResponseWriter, r *http.Request) {
	c.running.Add(1)
	defer c.running.Done()
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	first := c.runs.Begin(key)
	slow := c.slow
	select {
	case c.started <- key:
	default:
	}
	if first && slow != nil {
		select {
		case <-slow:
		case <-time.After(20 * time.Second): // never past the test
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	answer := `{"charge":"ch_` + hex.EncodeToString(b) + `","request":` + string(body) + `}`
	c.runs.Answer(key, answer, first)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, answer)
}

// each sets a fault on every instance's proxy.
func (c *cluster) each(fn func(p *faultproxy.Proxy)) {
	for _, p := range c.proxies {
		fn(p)
	}
}

// clean clears every fault.
func (c *cluster) clean() {
	c.each(func(p *faultproxy.Proxy) { p.DropReplies(false); p.RefuseNew(false); p.BlackHole(false) })
}

// RoundTrip sends each attempt to the next instance in turn, over a
// connection of its own, so that a fault applies to the attempt it is set
// for.
func (c *cluster) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(c.next.Add(1)) % len(c.proxies)
	u := *r.URL
	u.Host = c.proxies[i].Addr()
	r2 := r.Clone(r.Context())
	r2.URL = &u
	r2.Body = r.Body
	return fresh.RoundTrip(r2)
}

var fresh = &http.Transport{DisableKeepAlives: true}

// client returns an HTTP client over the cluster with fast backoff, the
// hook given and the options given.
func (c *cluster) client(t *testing.T, hook func(client.Attempt), opts ...client.Option) *http.Client {
	t.Helper()
	base := []client.Option{client.WithBackoff(5*time.Millisecond, 50*time.Millisecond), client.WithDeadline(30 * time.Second),
		client.WithRetention(24 * time.Hour), client.WithReplayMarker(replayMarker)}
	if hook != nil {
		base = append(base, client.WithAttemptHook(hook))
	}
	tr, err := client.New(c, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

// result is what the caller of one operation received.
type result struct {
	status  int
	body    string
	outcome client.Outcome
	err     error
}

// charge sends one operation through hc.
func charge(ctx context.Context, hc *http.Client, key, body string) result {
	req, err := http.NewRequestWithContext(client.ContextWithKey(ctx, key), http.MethodPost, "http://service/charges", strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	o, _ := client.OutcomeOf(resp)
	return result{status: resp.StatusCode, body: string(b), outcome: o, err: err}
}

// wantOnce checks that key ran once and that got is its stored answer.
func (c *cluster) wantOnce(t *testing.T, key string, got result) {
	t.Helper()
	runs, answer := c.runs.Of(key)
	if got.err != nil {
		t.Fatalf("%s: %v (after %d attempts)", key, got.err, got.outcome.Attempts)
	}
	if runs != 1 || got.status != http.StatusCreated || got.body != answer {
		t.Fatalf("%s: %d executions; got %d %q, the record holds %q", key, runs, got.status, got.body, answer)
	}
}

// realStack is the shared real Redis and Postgres (required under
// IDEM_REQUIRE_SERVICES=1).
func realStack(t *testing.T) *stacktest.Stack {
	t.Helper()
	return stacktest.On(t, "real", testenv.RealRedis(t), testenv.Postgres(t))
}

// answer returns the answer key's execution made.
func (c *cluster) answer(key string) string {
	_, a := c.runs.Of(key)
	return a
}
