package idemtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
)

const payBody = `{"amount":100,"currency":"EUR"}`

func noKeyPassesThrough(t *testing.T, e *env) {
	s := e.start(t, nil)
	a := s.send(t, request{path: "/pay", body: payBody})
	b := s.send(t, request{path: "/pay", body: payBody})
	wantStatus(t, a, http.StatusCreated)
	wantStatus(t, b, http.StatusCreated)
	wantRuns(t, e, 2)
	if !strings.Contains(string(a.body), `"amount":"100"`) {
		t.Fatalf("the handler did not read the body: %q", a.body)
	}
	if string(a.body) == string(b.body) || b.header.Get("Set-Cookie") == "" {
		t.Fatalf("second response %q %v is not the handler's own", b.body, b.header)
	}
}

func unguardedMethod(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	a := s.send(t, request{method: http.MethodGet, path: "/pay", key: k})
	b := s.send(t, request{method: http.MethodGet, path: "/pay", key: k})
	wantStatus(t, a, http.StatusOK)
	if string(a.body) == string(b.body) {
		t.Fatalf("GET was replayed: %q", b.body)
	}
	wantRuns(t, e, 2)

	// PATCH is guarded by default.
	k = newKey()
	a = s.send(t, request{method: http.MethodPatch, path: "/pay", key: k, body: payBody})
	b = s.send(t, request{method: http.MethodPatch, path: "/pay", key: k, body: payBody})
	wantReplay(t, a, b)
	wantRuns(t, e, 3)

	// WithMethods replaces the list: PATCH passes through.
	s2 := e.start(t, []middleware.Option{middleware.WithMethods(http.MethodPost)})
	a = s2.send(t, request{method: http.MethodPatch, path: "/pay", key: k, body: payBody})
	wantStatus(t, a, http.StatusCreated)
	wantRuns(t, e, 4)
}

func requiredKeyMissing(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{middleware.WithRequire(true)})
	r := s.send(t, request{path: "/pay", body: payBody})
	wantProblem(t, r, http.StatusBadRequest, middleware.ProblemKeyMissing)
	wantRuns(t, e, 0)
	r = s.send(t, request{method: http.MethodGet, path: "/pay"})
	wantStatus(t, r, http.StatusOK) // only guarded methods need a key
	wantRuns(t, e, 1)
}

func malformedKeys(t *testing.T, e *env) {
	s := e.start(t, nil)
	for _, c := range []struct {
		name string
		keys []string
	}{
		{"empty", []string{""}},
		{"256 bytes", []string{strings.Repeat("a", 256)}},
		{"quoted 256 bytes", []string{`"` + strings.Repeat("a", 256) + `"`}},
		{"tab", []string{"a\tb"}},
		{"not ASCII", []string{"clé"}},
		{"two header lines", []string{newKey(), newKey()}},
		{"comma", []string{"a, b"}},
		{"empty string", []string{`""`}},
		{"unterminated string", []string{`"abc`}},
		{"bad escape", []string{`"a\qb"`}},
		{"parameters", []string{`"abc";p=1`}},
		{"list", []string{`"a", "b"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.send(t, request{path: "/pay", keys: c.keys, body: payBody})
			wantProblem(t, r, http.StatusBadRequest, middleware.ProblemKeyMalformed)
		})
	}
	wantRuns(t, e, 0)
	long := newKey() + strings.Repeat("z", 255-len(newKey()))
	r := s.send(t, request{path: "/pay", key: long, body: payBody})
	wantStatus(t, r, http.StatusCreated) // 255 bytes is fine
}

func quotedEqualsBare(t *testing.T, e *env) {
	s := e.start(t, nil)
	k := newKey()
	a := s.send(t, request{path: "/pay", key: `"` + k + `"`, body: payBody})
	b := s.send(t, request{path: "/pay", key: k, body: payBody})
	wantStatus(t, a, http.StatusCreated)
	wantReplay(t, a, b)

	k = newKey()
	a = s.send(t, request{path: "/pay", key: `"a\"b\\c ` + k + `"`, body: payBody})
	b = s.send(t, request{path: "/pay", key: `a"b\c ` + k, body: payBody})
	wantReplay(t, a, b)
	wantRuns(t, e, 2)
}

func derivedKey(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{middleware.WithDerivedKey(true)})
	body := `{"amount":1,"currency":"` + newKey() + `"}`
	a := s.send(t, request{path: "/pay", body: body})
	b := s.send(t, request{path: "/pay", body: body})
	wantStatus(t, a, http.StatusCreated)
	wantReplay(t, a, b)
	// Noisy fields do not count; the body does.
	c := s.send(t, request{path: "/pay", body: strings.Replace(body, "{", `{"request_id":"r2",`, 1)})
	wantReplay(t, a, c)
	d := s.send(t, request{path: "/pay", body: `{"amount":1,"currency":"` + newKey() + `"}`})
	wantStatus(t, d, http.StatusCreated)
	wantRuns(t, e, 2)
}
