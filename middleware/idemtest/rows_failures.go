package idemtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

func storeDown(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	s.deciding().Down()
	r := s.send(t, request{path: "/pay", key: k, body: payBody})
	wantProblem(t, r, http.StatusServiceUnavailable, middleware.ProblemUnavailable)
	if got := r.header.Get("Retry-After"); got != "5" {
		t.Fatalf("Retry-After %q, want 5", got)
	}
	wantRuns(t, e, 0)
	s.deciding().Up()
	r = s.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, r, http.StatusCreated)
	wantRuns(t, e, 1)
}

// completionPending: the handler ran, but SQL refuses its completion for
// longer than half the lease. The leader's client gets 503 with Retry-After
// — not the handler's 201, whose record could still be lost — and once SQL
// takes the completion, which the Store keeps retrying while it holds the
// lease, a retry replays the 201. The handler ran once. In the atomic mode
// the completion is a statement of the Store's transaction: refused, it
// rolls everything back, so the leader's client gets 503, nothing is
// stored, and the retry runs the handler again.
func completionPending(t *testing.T, e *env) {
	s := e.start(t, nil, tiered.WithLease(400*time.Millisecond))
	k := newKey()
	s.deciding().Fail(fmt.Errorf("%w: completion refused", idem.ErrUnavailable), faultlayer.Complete)
	r := s.send(t, request{path: "/pay", key: k, body: payBody})
	if e.Atomic {
		wantProblem(t, r, http.StatusServiceUnavailable, middleware.ProblemUnavailable)
		if s.stored(t, idem.NewKey("", k)) {
			t.Fatal("a completion refused inside the transaction left a record")
		}
		s.deciding().Up()
		r = s.send(t, request{path: "/pay", key: k, body: payBody})
		wantStatus(t, r, http.StatusCreated)
		if !strings.Contains(string(r.body), `"run":2`) {
			t.Fatalf("the retry got %q, want a run of its own", r.body)
		}
		wantRuns(t, e, 2)
		return
	}
	p := wantProblem(t, r, http.StatusServiceUnavailable, middleware.ProblemUnavailable)
	if r.header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "processed") {
		t.Fatalf("pending completion answered %+v, Retry-After %q", p, r.header.Get("Retry-After"))
	}
	s.deciding().Up()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = s.send(t, request{path: "/pay", key: k, body: payBody})
		if r.status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pending completion never landed: %d %q", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(string(r.body), `"run":1`) {
		t.Fatalf("the retry got %q, want the first run's response", r.body)
	}
	wantRuns(t, e, 1)
}

func redisDown(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	k := newKey()
	s1.redFaults.Down()
	a := s1.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, a, http.StatusCreated) // SQL decides alone
	wantReplay(t, a, s2.send(t, request{path: "/pay", key: k, body: payBody}))
	wantRuns(t, e, 1)
}

func failuresRelease(t *testing.T, e *env) {
	s := e.start(t, nil)
	runs := int64(0)
	for _, status := range []int{500, 502, 503, 408, 425, 429} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			k := newKey()
			path := "/status/" + strconv.Itoa(status)
			a := s.send(t, request{path: path, key: k, body: payBody})
			wantStatus(t, a, status)
			if s.stored(t, idem.NewKey("", k)) {
				t.Fatalf("a %d response was stored", status)
			}
			b := s.send(t, request{path: path, key: k, body: payBody})
			wantStatus(t, b, status)
			if string(a.body) == string(b.body) {
				t.Fatalf("the retry was replayed: %q", b.body)
			}
			runs += 2
			wantRuns(t, e, runs)
		})
	}
	t.Run("panic", func(t *testing.T) {
		k := newKey()
		a := s.send(t, request{path: "/panic", key: k, body: payBody})
		wantProblem(t, a, http.StatusInternalServerError, middleware.ProblemFailed)
		b := s.send(t, request{path: "/panic", key: k, body: payBody})
		wantProblem(t, b, http.StatusInternalServerError, middleware.ProblemFailed)
		runs += 2
		wantRuns(t, e, runs)
	})
	for _, status := range []int{200, 303, 400, 404, 409} {
		t.Run(strconv.Itoa(status)+" kept", func(t *testing.T) {
			k := newKey()
			path := "/status/" + strconv.Itoa(status)
			a := s.send(t, request{path: path, key: k, body: payBody})
			b := s.send(t, request{path: path, key: k, body: payBody})
			wantStatus(t, a, status)
			wantSame(t, a, b)
			runs++
			wantRuns(t, e, runs)
		})
	}
}

// latePanic: a handler that flushed, then panicked, cuts the connection.
// In the atomic mode the flush held the response, so nothing reached the
// client: it gets the 500 problem of any panic.
func latePanic(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	q := request{path: "/panic?late=1", key: k, body: payBody}
	if e.Atomic {
		wantProblem(t, s.send(t, q), http.StatusInternalServerError, middleware.ProblemFailed)
		if s.stored(t, idem.NewKey("", k)) {
			t.Fatal("a panicked response was stored")
		}
		wantProblem(t, s.send(t, q), http.StatusInternalServerError, middleware.ProblemFailed)
		wantRuns(t, e, 2)
		return
	}
	if r, err := s.try(t, q); err == nil {
		t.Fatalf("a response cut by a panic arrived whole: %d %q", r.status, r.body)
	}
	if s.stored(t, idem.NewKey("", k)) {
		t.Fatal("a panicked response was stored")
	}
	if _, err := s.try(t, q); err == nil {
		t.Fatal("the retry arrived whole")
	}
	wantRuns(t, e, 2)
}
