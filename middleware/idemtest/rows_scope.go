package idemtest

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
)

// kitOptions are the middleware options the kit mounts with: a row's own
// after the scope of a service with one principal, which a row that checks
// scopes replaces with its own (the last scope given wins).
func kitOptions(opts []middleware.Option) []middleware.Option {
	return append([]middleware.Option{middleware.WithSingleTenant()}, opts...)
}

// tenantScope names the principal by the X-Tenant header the kit's
// requests carry: the stand-in for what the stack's authentication puts
// in the request's context.
var tenantScope = middleware.WithScope(func(r *http.Request) string { return r.Header.Get("X-Tenant") })

func asTenant(tenant, key, body string) request {
	q := request{path: "/pay", key: key, body: body}
	if tenant != "" {
		q.header = http.Header{"X-Tenant": {tenant}}
	}
	return q
}

// scopeRequired: no configuration of the stack leaves the scope out
// silently. A mount whose options name neither a scope nor a single
// tenant fails, with a derived key or a required key as without.
func scopeRequired(t *testing.T, e *env) {
	store := e.open(t, nil).store
	for _, opts := range [][]middleware.Option{
		nil,
		{middleware.WithDerivedKey(true)},
		{middleware.WithRequire(true), middleware.WithReplayMarker("Idempotent-Replayed")},
	} {
		if _, err := e.Mount(store, opts, e.app); !errors.Is(err, idem.ErrConfig) {
			t.Fatalf("Mount without a scope (%d options): err %v, want one wrapping idem.ErrConfig", len(opts), err)
		}
		if e.Chain != nil {
			if _, err := e.Chain(store, opts, func(http.ResponseWriter, *http.Request) bool { return true }, e.app); !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("Chain without a scope (%d options): err %v, want one wrapping idem.ErrConfig", len(opts), err)
			}
		}
	}
}

// tenants: the same key from two principals names two operations, on any
// instance, and neither reads the other's answer.
func tenants(t *testing.T, e *env) {
	s1, s2 := e.start(t, []middleware.Option{tenantScope}), e.start(t, []middleware.Option{tenantScope})
	k := newKey()
	a := s1.send(t, asTenant("acme", k, payBody))
	b := s1.send(t, asTenant("globex", k, payBody))
	wantStatus(t, a, http.StatusCreated)
	wantStatus(t, b, http.StatusCreated)
	if !strings.Contains(string(a.body), `"tenant":"acme"`) || !strings.Contains(string(b.body), `"tenant":"globex"`) {
		t.Fatalf("tenants saw %q and %q", a.body, b.body)
	}
	wantReplay(t, a, s2.send(t, asTenant("acme", k, payBody)))
	wantReplay(t, b, s2.send(t, asTenant("globex", k, payBody)))
	wantReplay(t, a, s1.send(t, asTenant("acme", k, payBody)))
	wantRuns(t, e, 2)
}

// noPrincipal: a keyed request whose scope names no principal is refused
// before anything is claimed; the same key then runs for a principal.
func noPrincipal(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{tenantScope})
	k := newKey()
	wantProblem(t, s.send(t, asTenant("", k, payBody)), http.StatusUnauthorized, middleware.ProblemScopeMissing)
	wantRuns(t, e, 0)
	a := s.send(t, asTenant("acme", k, payBody))
	wantStatus(t, a, http.StatusCreated)
	wantRuns(t, e, 1)
	// A request with no key passes through untouched: there is nothing
	// to bind.
	wantStatus(t, s.send(t, asTenant("", "", payBody)), http.StatusCreated)
	wantRuns(t, e, 2)
}

// derivedKeyScoped: a key derived from the fingerprint is bound to the
// principal as a client's key is: two principals sending the same body
// without a key run twice.
func derivedKeyScoped(t *testing.T, e *env) {
	s := e.start(t, []middleware.Option{tenantScope, middleware.WithDerivedKey(true)})
	body := `{"amount":1,"currency":"` + newKey() + `"}`
	a := s.send(t, asTenant("acme", "", body))
	b := s.send(t, asTenant("globex", "", body))
	wantStatus(t, a, http.StatusCreated)
	wantStatus(t, b, http.StatusCreated)
	if string(a.body) == string(b.body) {
		t.Fatalf("globex got acme's answer: %q", b.body)
	}
	wantReplay(t, a, s.send(t, asTenant("acme", "", body)))
	wantReplay(t, b, s.send(t, asTenant("globex", "", body)))
	wantRuns(t, e, 2)
	wantProblem(t, s.send(t, asTenant("", "", body)), http.StatusUnauthorized, middleware.ProblemScopeMissing)
	wantRuns(t, e, 2)
}
