package idemtest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

func completedReplay(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	k := newKey()
	a := s1.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, a, http.StatusCreated)
	if a.header.Get("Location") == "" || a.header.Get("ETag") == "" || a.header.Get("Link") == "" {
		t.Fatalf("first response lacks Location, ETag or Link: %v", a.header)
	}
	b := s1.send(t, request{path: "/pay", key: k, body: payBody}) // local cache
	wantReplay(t, a, b)
	c := s2.send(t, request{path: "/pay", key: k, body: payBody}) // the shared tiers
	wantReplay(t, a, c)
	if got := c.header.Get("Content-Length"); got != strconv.Itoa(len(a.body)) {
		t.Fatalf("replay Content-Length %q, want %d", got, len(a.body))
	}
	if got := c.header.Get("Idempotent-Replayed"); got != "" {
		t.Fatalf("replay marked %q without WithReplayMarker", got)
	}
	wantRuns(t, e, 1)
}

func replayMarker(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{middleware.WithReplayMarker("Idempotent-Replayed")})
	k := newKey()
	a := s.send(t, request{path: "/pay", key: k, body: payBody})
	b := s.send(t, request{path: "/pay", key: k, body: payBody})
	wantReplay(t, a, b)
	if a.header.Get("Idempotent-Replayed") != "" || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("marker: first %q, replay %q", a.header.Get("Idempotent-Replayed"), b.header.Get("Idempotent-Replayed"))
	}
}

// parallel sends q to each server at once (after the previous one reached
// its handler or found the key busy, as told by ready) and returns the
// replies in order.
func parallel(t *testing.T, q request, servers []*server, ready []func()) []reply {
	t.Helper()
	out := make([]reply, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { out[i], errs[i] = s.try(t, q) })
		ready[i]()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

func inFlightWaits(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	q := request{path: "/slow", key: newKey(), body: payBody}
	started := func() {
		if !e.app.Started(10 * time.Second) {
			t.Error("the first request never reached the handler")
		}
	}
	waiting := func() { e.waitBusy(t); e.app.Release() }
	r := parallel(t, q, []*server{s1, s2}, []func(){started, waiting})
	wantStatus(t, r[0], http.StatusCreated)
	wantReplay(t, r[0], r[1])
	wantRuns(t, e, 1)
}

func inFlightPastWait(t *testing.T, e *env) {
	s1 := e.start(t, nil)
	s2 := e.start(t, nil, tiered.WithWait(100*time.Millisecond))
	q := request{path: "/slow", key: newKey(), body: payBody}
	answer := leadSlow(t, e, s1, q)
	r := s2.send(t, q)
	wantProblem(t, r, http.StatusConflict, middleware.ProblemInFlight)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	e.app.Release()
	first := answer()
	wantStatus(t, first, http.StatusCreated)
	wantReplay(t, first, s2.send(t, q))
	wantRuns(t, e, 1)
}

// leadSlow sends q (a /slow request) to s and waits until its handler
// runs; the returned function waits for its answer once the row released
// the handler.
func leadSlow(t *testing.T, e *env, s *server, q request) (answer func() reply) {
	t.Helper()
	var first reply
	var err error
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() { first, err = s.try(t, q); close(done) })
	if !e.app.Started(10 * time.Second) {
		select {
		case <-done:
			t.Fatalf("the first request never reached the handler: it got %d %q, %v", first.status, first.body, err)
		default:
			t.Fatal("the first request never reached the handler")
		}
	}
	return func() reply {
		t.Helper()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return first
	}
}

// inFlightHerePastWait: a duplicate of a request that this same instance
// is executing obeys the wait as one on another instance does: 409 with
// Retry-After while the handler still runs, not an answer once the handler
// is done.
func inFlightHerePastWait(t *testing.T, e *env) {
	s := e.start(t, nil, tiered.WithWait(100*time.Millisecond))
	q := request{path: "/slow", key: newKey(), body: payBody}
	answer := leadSlow(t, e, s, q)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	dup := q
	dup.ctx = ctx // the handler waits for Release: a duplicate that waits for it never returns
	r, derr := s.try(t, dup)
	e.app.Release()
	first := answer()
	if derr != nil {
		t.Fatalf("the duplicate waited for the handler: %v", derr)
	}
	wantProblem(t, r, http.StatusConflict, middleware.ProblemInFlight)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1", got)
	}
	wantStatus(t, first, http.StatusCreated)
	wantReplay(t, first, s.send(t, q))
	wantRuns(t, e, 1)
}

// duplicateHereGivesUp: a duplicate of a request that this same instance
// is executing stops waiting when its own client leaves — the server is
// done with it while the handler still runs — and the work goes on for the
// leader and for later retries.
func duplicateHereGivesUp(t *testing.T, e *env) {
	s := e.start(t, nil)
	q := request{path: "/slow", key: newKey(), body: payBody}
	answer := leadSlow(t, e, s, q)
	ctx, cancel := context.WithCancel(t.Context())
	dup := q
	dup.ctx = ctx
	done := make(chan error, 1)
	go func() { _, err := s.try(t, dup); done <- err }()
	s.waitActive(t, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the duplicate's client got %v, want its own cancellation", err)
	}
	s.waitActive(t, 1) // only the leader is left, its handler still held
	e.app.Release()
	first := answer()
	wantStatus(t, first, http.StatusCreated)
	wantReplay(t, first, s.send(t, q))
	wantRuns(t, e, 1)
}

func mismatch(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	k := newKey()
	a := s1.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, a, http.StatusCreated)
	other := strings.Replace(payBody, "100", "200", 1)
	for _, c := range []struct {
		name string
		s    *server
		q    request
	}{
		{"other body", s1, request{path: "/pay", key: k, body: other}},
		{"other body, other instance", s2, request{path: "/pay", key: k, body: other}},
		{"other route", s1, request{path: "/other", key: k, body: payBody}},
		{"other route, other instance", s2, request{path: "/other", key: k, body: payBody}},
		{"other method", s1, request{method: http.MethodPatch, path: "/pay", key: k, body: payBody}},
		{"other query", s1, request{path: "/pay?x=1", key: k, body: payBody}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.s.send(t, c.q)
			wantProblem(t, r, http.StatusUnprocessableEntity, middleware.ProblemMismatch)
			if strings.Contains(string(r.body), `"run"`) {
				t.Fatalf("mismatch leaked a response: %q", r.body)
			}
		})
	}
	// Noisy fields (the default deny-list) do not make a mismatch.
	noisy := strings.Replace(payBody, "{", `{"request_id":"retry-2","timestamp":1700000000,`, 1)
	wantReplay(t, a, s2.send(t, request{path: "/pay", key: k, body: noisy}))
	wantRuns(t, e, 1)
}

// clientGivesUp: the leading client disconnects while the handler runs. The
// handler is not cancelled, finishes, and its response is stored for the
// retry.
func clientGivesUp(t *testing.T, e *env) {
	s := e.start(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	q := request{path: "/slow", key: newKey(), body: payBody, ctx: ctx}
	done := make(chan error, 1)
	go func() { _, err := s.try(t, q); done <- err }()
	if !e.app.Started(10 * time.Second) {
		t.Fatal("the request never reached the handler")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client got %v, want its own cancellation", err)
	}
	e.app.Release()
	q.ctx = nil
	r := s.send(t, q)
	wantStatus(t, r, http.StatusCreated)
	if !strings.Contains(string(r.body), `"run":1`) {
		t.Fatalf("the retry got %q, want the first run's response", r.body)
	}
	wantRuns(t, e, 1)
}
