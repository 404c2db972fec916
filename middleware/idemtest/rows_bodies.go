package idemtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
)

func bodyOverLimit(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{middleware.WithBodyLimit(1024)})
	k := newKey()
	big := `{"amount":100,"note":"` + strings.Repeat("x", 2048) + `"}`
	for _, chunked := range []bool{false, true} {
		r := s.send(t, request{path: "/pay", key: k, body: big, chunked: chunked})
		wantProblem(t, r, http.StatusRequestEntityTooLarge, middleware.ProblemBodyTooLarge)
	}
	wantRuns(t, e, 0)
	if s.stored(t, idem.NewKey("", k)) {
		t.Fatal("a record exists for a body over the limit")
	}
	r := s.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, r, http.StatusCreated) // the key was never claimed
}

func brokenJSON(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	for _, body := range []string{`{"amount":`, `{"amount":1,"amount":2}`, `{"amount":1} trailing`} {
		r := s.send(t, request{path: "/pay", key: k, body: body})
		wantProblem(t, r, http.StatusBadRequest, middleware.ProblemBodyInvalid)
	}
	wantRuns(t, e, 0)
	if s.stored(t, idem.NewKey("", k)) {
		t.Fatal("a record exists for a broken body")
	}
	r := s.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, r, http.StatusCreated)
}

// goReadsDifferently: bodies a Go handler reads as different requests
// never share a fingerprint. Member names that differ only in
// case are ambiguous to encoding/json (the last match wins), so such a body
// is refused before any claim, whatever its order; two integers that round
// to one double are two requests, so reusing the key for the other one is a
// mismatch, not a replay of the first one's charge.
func goReadsDifferently(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	for _, body := range []string{`{"amount":100,"AMOUNT":5,"currency":"EUR"}`, `{"AMOUNT":5,"amount":100,"currency":"EUR"}`} {
		r := s.send(t, request{path: "/pay", key: k, body: body})
		wantProblem(t, r, http.StatusBadRequest, middleware.ProblemBodyInvalid)
	}
	wantRuns(t, e, 0)
	k = newKey()
	a := s.send(t, request{path: "/pay", key: k, body: `{"amount":9007199254740993,"currency":"EUR"}`})
	wantStatus(t, a, http.StatusCreated)
	b := s.send(t, request{path: "/pay", key: k, body: `{"amount":9007199254740992,"currency":"EUR"}`})
	wantProblem(t, b, http.StatusUnprocessableEntity, middleware.ProblemMismatch)
	wantRuns(t, e, 1)
}
