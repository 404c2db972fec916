package behaviour

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
