package idemtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// The rows of the handler-ending table (Endings) that the other rows do
// not already check.

// writesNothing: a handler that returns without writing has decided
// nothing. Not an empty 200 for the key's whole retention: a 500 problem,
// nothing stored, and the retry runs the handler again.
func writesNothing(t *testing.T, e *env) { releasedEnding(t, e, "/end/nothing") }

// releasedEnding checks an ending that commits nothing: the first caller
// and the retry each get a 500 problem, nothing is stored, and the handler
// ran for both.
func releasedEnding(t *testing.T, e *env, path string) {
	t.Helper()
	s := e.start(t, nil)
	k := newKey()
	q := request{path: path, key: k, body: payBody}
	wantProblem(t, s.send(t, q), http.StatusInternalServerError, middleware.ProblemFailed)
	if s.stored(t, idem.NewKey("", k)) {
		t.Fatalf("%s left a record", path)
	}
	wantProblem(t, s.send(t, q), http.StatusInternalServerError, middleware.ProblemFailed)
	wantRuns(t, e, 2)
}

// emptyOnPurpose: an explicit WriteHeader(200) with no body is an answer.
func emptyOnPurpose(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	q := request{path: "/end/empty", key: newKey(), body: payBody}
	a := s1.send(t, q)
	if a.status != http.StatusOK || len(a.body) != 0 {
		t.Fatalf("first %d %q, want an empty 200", a.status, a.body)
	}
	wantReplay(t, a, s2.send(t, q))
	wantRuns(t, e, 1)
}

// keyOnly: a handler that reads its key (idem.KeyFrom) for a downstream
// service answers as any handler does: its response is stored and
// replayed, since it took no reservation.
func keyOnly(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	q := request{path: "/end/key-only", key: newKey(), body: payBody}
	a := s1.send(t, q)
	wantStatus(t, a, http.StatusCreated)
	if !strings.Contains(string(a.body), `"ok":true`) {
		t.Fatalf("the handler found no key: %q", a.body)
	}
	wantReplay(t, a, s2.send(t, q))
	wantRuns(t, e, 1)
}

// lateHeaders: headers changed after the status was written — through a
// header map taken before WriteHeader, or on w.Header() after the body
// began — reach no caller. The first caller gets the headers as they were
// at WriteHeader, as every retry does.
func lateHeaders(t *testing.T, e *env) {
	for _, c := range []struct {
		path     string
		location string // at WriteHeader
	}{
		{"/end/late-headers", "/orders/1"},
		{"/end/headers-after-write", ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			e := e.kit.env()
			s1, s2 := e.start(t, nil), e.start(t, nil)
			q := request{path: c.path, key: newKey(), body: payBody}
			a := s1.send(t, q)
			wantStatus(t, a, http.StatusCreated)
			if got := a.header.Get("Location"); got != c.location {
				t.Fatalf("first caller's Location %q, want %q (as at WriteHeader)", got, c.location)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("first caller's Content-Type %q, want application/json (as at WriteHeader)", ct)
			}
			for _, name := range []string{"ETag", "Link"} {
				if v := a.header.Values(name); len(v) > 0 {
					t.Fatalf("first caller got the late %s %q", name, v)
				}
			}
			for _, s := range []*server{s1, s2} {
				b := s.send(t, q)
				wantReplay(t, a, b)
				for _, name := range []string{"Location", "Content-Type", "ETag", "Link"} {
					if got, want := b.header.Values(name), a.header.Values(name); len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
						t.Fatalf("retry's %s %q, first caller's %q", name, got, want)
					}
				}
			}
			wantRuns(t, e, 1)
		})
	}
}

// writeThenPanic: a whole response written, held, then a panic: nothing of
// it went out, so the first caller gets a clean 500 problem, nothing is
// stored, and the retry runs again.
func writeThenPanic(t *testing.T, e *env) { releasedEnding(t, e, "/end/write-then-panic") }

// goexit: runtime.Goexit in the handler, before or after writing, ends
// the execution: the key is released, the first caller gets a 500 problem
// (the handler's goroutine is the Store's, not the request's), and the
// retry runs again.
func goexit(t *testing.T, e *env) {
	for _, path := range []string{"/end/goexit", "/end/write-then-goexit"} {
		t.Run(path, func(t *testing.T) { releasedEnding(t, e.kit.env(), path) })
	}
}

// longerThanLease: work that outlives its lease several times over keeps
// its claim by renewal: a duplicate on another instance meanwhile gets 409,
// never a second run, and the retry replays the one response.
func longerThanLease(t *testing.T, e *env) {
	outlives(t, e, 1500*time.Millisecond, 0)
}

// longerThanRetention: work that outlives the retention keeps its claim,
// lease and grace included: the record cannot expire under it.
func longerThanRetention(t *testing.T, e *env) {
	outlives(t, e, 1500*time.Millisecond, 2*time.Second)
}

// outlives runs /end/slow for three leases (and, with a retention, past
// it) on one instance while another sends a duplicate after each lease. The
// lease is long enough for renewals to reach a shared database on a loaded
// machine: a lease that lapses for want of a renewal may rightly be taken
// over, which is not what these rows are about.
func outlives(t *testing.T, e *env, lease, retention time.Duration) {
	opts := []tiered.Option{tiered.WithLease(lease)}
	if retention > 0 {
		opts = append(opts, tiered.WithRetention(retention))
	}
	s1 := e.start(t, nil, opts...)
	s2 := e.start(t, nil, append(opts, tiered.WithWait(10*time.Millisecond))...)
	q := request{path: "/end/slow", key: newKey(), body: payBody}
	answer := leadSlow(t, e, s1, q)
	for range max(3, int(retention/lease)+2) {
		time.Sleep(lease)
		wantProblem(t, s2.send(t, q), http.StatusConflict, middleware.ProblemInFlight)
	}
	e.app.Release()
	first := answer()
	done := time.Now()
	wantStatus(t, first, http.StatusCreated)
	retry := s2.send(t, q)
	if retention > 0 && time.Since(done) >= retention {
		// The machine stalled past the record's whole retention: a retry
		// may rightly run again, and there is nothing left to compare.
		t.Logf("the retry came %v after the completion, past the retention", time.Since(done))
		return
	}
	wantReplay(t, first, retry)
	wantRuns(t, e, 1)
}
