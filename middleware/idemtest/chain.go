package idemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// chainApp is what the chain rows mount: a later middleware and a handler that
// count their runs, each able to fail once.
type chainApp struct {
	later, runs  atomic.Int64
	laterPanic   atomic.Bool   // the later middleware panics once on /later-panic
	handlerPanic atomic.Bool   // the handler panics once on /panic
	started      chan struct{} // receives when /slow started
	release      chan struct{} // closed by Release to let /slow finish
	once         sync.Once
}

func newChainApp() *chainApp {
	a := &chainApp{started: make(chan struct{}, 1), release: make(chan struct{})}
	a.laterPanic.Store(true)
	a.handlerPanic.Store(true)
	return a
}

// Release lets every /slow handler, running or to come, finish.
func (a *chainApp) Release() { a.once.Do(func() { close(a.release) }) }

// Later is the middleware after idem:
//
//	/later-panic  panics before handing on, the first time
//	/later-abort  answers 401 itself and does not hand on
//	anything else hands on
func (a *chainApp) Later(w http.ResponseWriter, r *http.Request) bool {
	a.later.Add(1)
	switch r.URL.Path {
	case "/later-panic":
		if a.laterPanic.Swap(false) {
			panic("idemtest: later middleware panic")
		}
	case "/later-abort":
		writeJSON(w, http.StatusUnauthorized, `{"error":"who are you"}`)
		return false
	}
	return true
}

// ServeHTTP is the route's handler: 201 with the run number; /panic panics
// the first time; /slow waits for Release first (at most unreleased).
func (a *chainApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	switch r.URL.Path {
	case "/panic":
		if a.handlerPanic.Swap(false) {
			panic("idemtest: handler panic")
		}
	case "/slow":
		select {
		case a.started <- struct{}{}:
		default: // a duplicate the middleware let through
		}
		select {
		case <-a.release:
		case <-time.After(unreleased):
			writeJSON(w, http.StatusServiceUnavailable, `{"unreleased":true}`)
			return
		}
	}
	if r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"get":%d}`, n))
		return
	}
	writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"run":%d}`, n))
}

// chainServer is one router under test over a Store of its own.
type chainServer struct {
	*instance
	kit    *kit
	app    *chainApp
	url    string
	client *http.Client
}

// startChain starts an instance with a new chainApp.
func (k *kit) startChain(t *testing.T, opts ...middleware.Option) *chainServer {
	t.Helper()
	return k.startChainFor(t, newChainApp(), opts...)
}

// startChainFor starts an instance for the app of another: a duplicate in
// another process, which obeys the Store's Wait.
func (k *kit) startChainFor(t *testing.T, app *chainApp, opts ...middleware.Option) *chainServer {
	t.Helper()
	s := &chainServer{instance: k.open(t, nil, tiered.WithWait(100*time.Millisecond)), kit: k, app: app}
	h, err := k.mountChain(s.store, opts, app.Later, app)
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	srv := newServer(t, h, false)
	t.Cleanup(app.Release) // cleanups run last first: let /slow end, then close
	s.url, s.client = srv.URL, srv.Client()
	return s
}

// mountChain mounts with the stack's Chain, or with its Mount and later
// as a net/http wrapper of h.
func (k *kit) mountChain(store *tiered.Store, opts []middleware.Option, later func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
	opts = kitOptions(opts)
	if k.Chain != nil {
		return k.Chain(store, opts, later, h)
	}
	return k.Mount(store, opts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if later(w, r) {
			h.ServeHTTP(w, r)
		}
	}))
}

func (s *chainServer) send(t *testing.T, method, path, key, body string) reply {
	t.Helper()
	r, err := sendTo(t, s.client, method, s.url+path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// want checks how many times the later middleware and the handler ran.
func (s *chainServer) want(t *testing.T, later, runs int64) {
	t.Helper()
	if l, r := s.app.later.Load(), s.app.runs.Load(); l != later || r != runs {
		t.Fatalf("later middleware ran %d times and handler %d, want %d and %d", l, r, later, runs)
	}
}

// wantOnly checks that r is exactly a JSON object: nothing was written
// after the middleware answered.
func wantOnly(t *testing.T, r reply) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q is not one JSON object: %v", r.body, err)
	}
}

// chain checks that nothing after the idempotency middleware runs unless
// the middleware hands the request on: every path of the middleware
// (passing through, executing, replaying, answering a problem, recovering a
// panic in a later middleware or in the handler) is driven through a real
// server, counting the runs of a later middleware and of the handler.
func (k *kit) chain(t *testing.T) {
	t.Helper()
	for _, c := range []struct {
		name string
		opts []middleware.Option
		fn   func(t *testing.T, s *chainServer)
	}{
		{"pass through without a key", nil, func(t *testing.T, s *chainServer) {
			wantStatus(t, s.send(t, "POST", "/pay", "", payBody), http.StatusCreated)
			wantStatus(t, s.send(t, "POST", "/pay", "", payBody), http.StatusCreated)
			s.want(t, 2, 2)
		}},
		{"unguarded method", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			wantStatus(t, s.send(t, "GET", "/pay", k, ""), http.StatusOK)
			wantStatus(t, s.send(t, "GET", "/pay", k, ""), http.StatusOK)
			s.want(t, 2, 2)
		}},
		{"executed then replayed", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			a := s.send(t, "POST", "/pay", k, payBody)
			wantStatus(t, a, http.StatusCreated)
			wantSame(t, a, s.send(t, "POST", "/pay", k, payBody))
			s.want(t, 1, 1)
		}},
		{"later middleware panics before handing on", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			a := s.send(t, "POST", "/later-panic", k, payBody)
			wantProblem(t, a, http.StatusInternalServerError, middleware.ProblemFailed)
			wantOnly(t, a)
			s.want(t, 1, 0) // the handler never ran, not even after the 500
			b := s.send(t, "POST", "/later-panic", k, payBody)
			wantStatus(t, b, http.StatusCreated) // released: the retry runs once
			wantSame(t, b, s.send(t, "POST", "/later-panic", k, payBody))
			s.want(t, 2, 1)
		}},
		{"later middleware answers itself", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			a := s.send(t, "POST", "/later-abort", k, payBody)
			wantStatus(t, a, http.StatusUnauthorized)
			wantOnly(t, a)
			wantSame(t, a, s.send(t, "POST", "/later-abort", k, payBody)) // a 4xx is kept
			s.want(t, 1, 0)
		}},
		{"handler panics", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			a := s.send(t, "POST", "/panic", k, payBody)
			wantProblem(t, a, http.StatusInternalServerError, middleware.ProblemFailed)
			wantOnly(t, a)
			s.want(t, 1, 1)
			b := s.send(t, "POST", "/panic", k, payBody)
			wantStatus(t, b, http.StatusCreated)
			if string(b.body) != `{"run":2}` {
				t.Fatalf("retry %q, want run 2", b.body)
			}
			wantSame(t, b, s.send(t, "POST", "/panic", k, payBody))
			s.want(t, 2, 2)
		}},
		{"key missing", []middleware.Option{middleware.WithRequire(true)}, func(t *testing.T, s *chainServer) {
			wantProblem(t, s.send(t, "POST", "/pay", "", payBody), http.StatusBadRequest, middleware.ProblemKeyMissing)
			s.want(t, 0, 0)
		}},
		{"key malformed", nil, func(t *testing.T, s *chainServer) {
			wantProblem(t, s.send(t, "POST", "/pay", strings.Repeat("k", 256), payBody), http.StatusBadRequest, middleware.ProblemKeyMalformed)
			s.want(t, 0, 0)
		}},
		{"body too large", []middleware.Option{middleware.WithBodyLimit(8)}, func(t *testing.T, s *chainServer) {
			wantProblem(t, s.send(t, "POST", "/pay", newKey(), payBody), http.StatusRequestEntityTooLarge, middleware.ProblemBodyTooLarge)
			s.want(t, 0, 0)
		}},
		{"mismatch", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			wantStatus(t, s.send(t, "POST", "/pay", k, payBody), http.StatusCreated)
			wantProblem(t, s.send(t, "POST", "/pay", k, `{"amount":2}`), http.StatusUnprocessableEntity, middleware.ProblemMismatch)
			s.want(t, 1, 1)
		}},
		{"in flight", nil, func(t *testing.T, s *chainServer) {
			k := newKey()
			var wg sync.WaitGroup
			var first reply
			var err error
			wg.Go(func() { first, err = sendTo(t, s.client, "POST", s.url+"/slow", k, payBody) })
			select {
			case <-s.app.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request never reached the handler")
			}
			other := s.kit.startChainFor(t, s.app)
			wantProblem(t, other.send(t, "POST", "/slow", k, payBody), http.StatusConflict, middleware.ProblemInFlight)
			s.app.Release()
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, first, http.StatusCreated)
			s.want(t, 1, 1)
		}},
		{"store down", nil, func(t *testing.T, s *chainServer) {
			s.deciding().Down()
			wantProblem(t, s.send(t, "POST", "/pay", newKey(), payBody), http.StatusServiceUnavailable, middleware.ProblemUnavailable)
			s.want(t, 0, 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k.parallel(t)
			c.fn(t, k.startChain(t, c.opts...))
		})
	}
}
