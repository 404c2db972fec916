package idemtest

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

// env is what one row runs in: the kit, one app, any number of instances
// (servers with their own Store) over the stack's tiers.
type env struct {
	*kit
	app  *app
	busy chan struct{} // a Reserve found a key in progress
}

func (k *kit) env() *env {
	return &env{kit: k, app: newApp(), busy: make(chan struct{}, 64)}
}

// instance is one instance's Store over the stack's tiers, each tier
// wrapped to inject faults and to report a Reserve that found a key in
// progress (to busy, when not nil).
type instance struct {
	store      *tiered.Store
	redis, sql idem.Layer        // the stack's layers, for inspection; either may be nil
	redFaults  *faultlayer.Layer // the Redis tier as the Store sees it, when there is one
	sqlFaults  *faultlayer.Layer // the SQL tier as the Store sees it, when there is one
}

// deciding returns the faults of the tier whose word is final: SQL, or
// Redis when there is no SQL tier.
func (i *instance) deciding() *faultlayer.Layer {
	if i.sqlFaults != nil {
		return i.sqlFaults
	}
	return i.redFaults
}

// open opens the tiers of one instance and builds its Store: the tiers, the
// kit's timeouts, the stack's options, then so.
func (k *kit) open(t *testing.T, busy chan<- struct{}, so ...tiered.Option) *instance {
	t.Helper()
	i := &instance{}
	i.redis, i.sql = k.Tiers(t)
	var opts []tiered.Option
	if i.redis != nil {
		i.redFaults = faultlayer.New(i.redis)
		var red idem.Layer = i.redFaults
		if _, ok := i.redis.(interface {
			idem.Waiter
			idem.Filler
		}); ok {
			red = i.redFaults.Waiting()
		}
		opts = append(opts, tiered.WithRedis(watched(red, busy)))
	}
	if i.sql != nil {
		i.sqlFaults = faultlayer.New(i.sql)
		var sql idem.Layer = i.sqlFaults
		if a, ok := i.sqlFaults.Atomic(); ok {
			sql = a
		}
		opts = append(opts, tiered.WithSQL(watched(sql, busy)))
	}
	// Shared servers on busy machines: a slow answer is not a dead tier.
	opts = append(opts, tiered.WithTimeouts(2*time.Second, 10*time.Second))
	if k.Atomic {
		opts = append(opts, tiered.WithAtomic(true))
	}
	opts = append(opts, k.StoreOptions...)
	store, err := tiered.New(append(opts, so...)...)
	if err != nil {
		t.Fatalf("tiered.New: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	i.store = store
	return i
}

// server is one instance of a row: an httptest.Server with its own Store.
type server struct {
	*httptest.Server
	*instance
	active atomic.Int64 // requests the server is still serving
}

// start starts an instance with the middleware options mw and Store options
// so (after the stack's).
func (e *env) start(t *testing.T, mw []middleware.Option, so ...tiered.Option) *server {
	t.Helper()
	s := &server{instance: e.open(t, e.busy, so...)}
	mounted, err := e.Mount(s.store, kitOptions(mw), e.app)
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
func (i *instance) stored(t *testing.T, key idem.Key) bool {
	t.Helper()
	for _, l := range []idem.Layer{i.redis, i.sql} {
		if l == nil {
			continue
		}
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
	// A problem answered after the handler ran (a panic, a completion
	// still pending) carries none of the headers the handler set.
	for _, name := range []string{"Location", "ETag", "Link", "Set-Cookie", "X-Internal"} {
		if v := r.header.Values(name); len(v) > 0 {
			t.Fatalf("problem carries the handler's %s %q", name, v)
		}
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

// wantReplay checks that b replays a, the first response of the key's
// execution. The first response is sent from the record as every replay
// is: the headers that are never stored (Set-Cookie) or not allow-listed
// (X-Internal), which the handler set, reach neither.
func wantReplay(t *testing.T, a, b reply) {
	t.Helper()
	wantSame(t, a, b)
	for _, r := range []struct {
		name string
		r    reply
	}{{"first response", a}, {"replay", b}} {
		if v := r.r.header.Values("Set-Cookie"); len(v) > 0 {
			t.Fatalf("%s carries Set-Cookie %q (never stored)", r.name, v)
		}
		if v := r.r.header.Get("X-Internal"); v != "" {
			t.Fatalf("%s carries X-Internal %q (not allow-listed)", r.name, v)
		}
	}
}

func wantRuns(t *testing.T, e *env, n int64) {
	t.Helper()
	if got := e.app.Runs(); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
}
