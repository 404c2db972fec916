package behaviour

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Mount puts the middleware, built over store with opts, in front of h in
// one framework and returns the server's handler, or the middleware's
// constructor's error. h must see the requests and writers the framework
// hands to its own handlers.
type Mount func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error)

// env is what one row runs in: one backend, one App, any number of
// instances (servers with their own Store) over the backend.
type env struct {
	backend Backend
	mount   Mount
	app     *App
	busy    chan struct{} // a Reserve found a key in progress
}

func newEnv(t *testing.T, b Backend, m Mount) *env {
	return &env{backend: b, mount: m, app: NewApp(), busy: make(chan struct{}, 64)}
}

// server is one instance: an httptest.Server with its own Store.
type server struct {
	*httptest.Server
	active     atomic.Int64 // requests the server is still serving
	store      *tiered.Store
	redis, sql idem.Layer        // the backend's layers, for inspection
	sqlFaults  *faultlayer.Layer // the SQL tier as the Store sees it
	redFaults  *faultlayer.Layer // the Redis tier as the Store sees it
}

// start starts an instance with the middleware options mw and Store options
// so (after the tiers).
func (e *env) start(t *testing.T, mw []middleware.Option, so ...tiered.Option) *server {
	t.Helper()
	redis, sql := e.backend.Open(t)
	s := &server{redis: redis, sql: sql, sqlFaults: faultlayer.New(sql), redFaults: faultlayer.New(redis)}
	var red idem.Layer = s.redFaults
	if _, ok := redis.(idem.Waiter); ok {
		red = s.redFaults.Waiting()
	}
	opts := append([]tiered.Option{
		tiered.WithRedis(watched(red, e.busy)),
		tiered.WithSQL(watched(s.sqlFaults, e.busy)),
		// Shared servers on busy machines: a slow answer is not a dead tier.
		tiered.WithTimeouts(2*time.Second, 10*time.Second),
	}, so...)
	store, err := tiered.New(opts...)
	if err != nil {
		t.Fatalf("tiered.New: %v", err)
	}
	s.store = store
	t.Cleanup(func() { _ = store.Close() })
	mounted, err := e.mount(store, mw, e.app)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer s.active.Add(-1)
		mounted.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(e.app.Release) // cleanups run last first: let /slow end, then close
	return s
}

// stored reports whether either tier holds a record for key.
func (s *server) stored(t *testing.T, key idem.Key) bool {
	t.Helper()
	for _, l := range []idem.Layer{s.redis, s.sql} {
		_, err := l.Get(t.Context(), key)
		switch {
		case err == nil:
			return true
		case !errors.Is(err, idem.ErrNotFound):
			t.Fatalf("Get: %v", err)
		}
	}
	return false
}

// request is what a row sends.
type request struct {
	method, path, body string
	key                string   // the key header, when not ""
	keys               []string // raw key header lines, instead of key
	header             http.Header
	chunked            bool            // hide the length: the body is sent chunked
	ctx                context.Context // the client's context, t.Context() when nil
}

// reply is what came back, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
	proto  string // HTTP/1.1, HTTP/2.0
}

func (s *server) send(t *testing.T, q request) reply {
	t.Helper()
	rep, err := s.try(t, q)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	return rep
}

// try sends q and returns the transport's error instead of failing.
func (s *server) try(t *testing.T, q request) (reply, error) {
	t.Helper()
	var body io.Reader = strings.NewReader(q.body)
	if q.chunked {
		body = io.MultiReader(body)
	}
	method := q.method
	if method == "" {
		method = http.MethodPost
	}
	ctx := q.ctx
	if ctx == nil {
		ctx = t.Context()
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+q.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range q.header {
		req.Header[name] = vals
	}
	if q.body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case q.keys != nil:
		req.Header["Idempotency-Key"] = q.keys
	case q.key != "":
		req.Header.Set("Idempotency-Key", q.key)
	}
	res, err := s.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: res.StatusCode, header: res.Header, body: b, proto: res.Proto}, nil
}

// newKey returns a client key no other row uses.
func newKey() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "k-" + hex.EncodeToString(b)
}

// waitActive waits until s serves exactly n requests.
func (s *server) waitActive(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.active.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server serves %d requests, want %d", s.active.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitBusy waits until some Reserve found a key in progress.
func (e *env) waitBusy(t *testing.T) {
	t.Helper()
	select {
	case <-e.busy:
	case <-time.After(10 * time.Second):
		t.Fatal("no duplicate found the key in progress")
	}
}

func wantStatus(t *testing.T, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %q)", r.status, status, r.body)
	}
}

// wantProblem checks that r is the problem typ with status, and returns it.
func wantProblem(t *testing.T, r reply, status int, typ string) middleware.Problem {
	t.Helper()
	wantStatus(t, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p middleware.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem %q: %v", r.body, err)
	}
	if p.Type != typ || p.Status != status {
		t.Fatalf("problem %+v, want type %s status %d", p, typ, status)
	}
	return p
}

// wantSame checks that b is a byte-for-byte replay of a: status, body and
// the allowed headers, and none of the headers that are never replayed.
func wantSame(t *testing.T, a, b reply) {
	t.Helper()
	if a.status != b.status || string(a.body) != string(b.body) {
		t.Fatalf("replay %d %q, want %d %q", b.status, b.body, a.status, a.body)
	}
	for _, name := range middleware.DefaultReplayHeaders() {
		if got, want := b.header.Values(name), a.header.Values(name); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("replayed %s %q, want %q", name, got, want)
		}
	}
}

// wantReplay checks that b replays a, which came from the handler, and that
// the headers that are never stored are gone.
func wantReplay(t *testing.T, a, b reply) {
	t.Helper()
	wantSame(t, a, b)
	if a.header.Get("Set-Cookie") == "" || a.header.Get("X-Internal") == "" {
		t.Fatalf("first response lacks Set-Cookie or X-Internal: %v", a.header)
	}
	if v := b.header.Values("Set-Cookie"); len(v) > 0 {
		t.Fatalf("replay carries Set-Cookie %q", v)
	}
	if v := b.header.Get("X-Internal"); v != "" {
		t.Fatalf("replay carries X-Internal %q (not allow-listed)", v)
	}
}

func wantRuns(t *testing.T, e *env, n int64) {
	t.Helper()
	if got := e.app.Runs(); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
}
