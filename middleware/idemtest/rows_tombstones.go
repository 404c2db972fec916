package idemtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
)

// flushTombstone: a flushed response goes live and is stored as a
// tombstone. In the atomic mode nothing leaves before the commit: the
// flush holds, and the whole response is stored and replayed.
func flushTombstone(t *testing.T, e *env) {
	s1, s2 := e.start(t, nil), e.start(t, nil)
	q := request{path: "/flush", key: newKey(), body: payBody}
	a := s1.send(t, q)
	wantStatus(t, a, http.StatusOK)
	if string(a.body) != "part1;part2;run=1" {
		t.Fatalf("streamed body %q", a.body)
	}
	if e.Atomic {
		for _, s := range []*server{s1, s2} {
			wantSame(t, a, s.send(t, q))
		}
		wantRuns(t, e, 1)
		return
	}
	for _, s := range []*server{s1, s2} {
		p := wantProblem(t, s.send(t, q), http.StatusConflict, middleware.ProblemNotReplayable)
		if p.OriginalStatus != http.StatusOK {
			t.Fatalf("original_status %d, want 200", p.OriginalStatus)
		}
	}
	wantRuns(t, e, 1)
}

func oversizedTombstone(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{middleware.WithResponseLimit(1024)})
	runs := int64(0)
	for _, path := range []string{"/big?size=4096", "/big?size=4096&cl=1"} {
		q := request{path: path, key: newKey(), body: payBody}
		a := s.send(t, q)
		wantStatus(t, a, http.StatusOK)
		if len(a.body) != 4096 || strings.Trim(string(a.body), "x") != "" {
			t.Fatalf("live body of %d bytes, want 4096", len(a.body))
		}
		p := wantProblem(t, s.send(t, q), http.StatusConflict, middleware.ProblemNotReplayable)
		if p.OriginalStatus != http.StatusOK {
			t.Fatalf("original_status %d, want 200", p.OriginalStatus)
		}
		runs++
		wantRuns(t, e, runs)
	}
	q := request{path: "/big?size=1024", key: newKey(), body: payBody} // at the limit
	a := s.send(t, q)
	wantSame(t, a, s.send(t, q))
	wantRuns(t, e, runs+1)
}

func hijackTombstone(t *testing.T, e *env) {
	s := e.start(t, nil)
	q := request{path: "/hijack", key: newKey(), body: payBody}
	a := s.send(t, q)
	if a.status != http.StatusOK || string(a.body) != "hijacked;run=1" {
		t.Fatalf("hijacked answer %d %q", a.status, a.body)
	}
	p := wantProblem(t, s.send(t, q), http.StatusConflict, middleware.ProblemNotReplayable)
	if p.OriginalStatus != 0 {
		t.Fatalf("original_status %d, want none", p.OriginalStatus)
	}
	wantRuns(t, e, 1)
}
