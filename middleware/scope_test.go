package middleware

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
)

// principalKey is where the test's authentication puts the user.
type principalKey struct{}

// authenticated is a service as users build it: authentication maps a
// bearer token to a user (several tokens per user: a refresh mints a new
// one), then idem, then the payment handler, which answers with the
// user's data.
func authenticated(t *testing.T, opts ...Option) (h http.Handler, runs *int) {
	t.Helper()
	tokens := map[string]string{"alice-1": "alice", "alice-2": "alice", "bob-1": "bob"}
	runs = new(int)
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*runs++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment_of":%q,"run":%d}`, r.Context().Value(principalKey{}), *runs)
	})
	mw := must.Get(New(newTestStore(t), opts...))(t)
	inner := mw(pay)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, user)))
	}), runs
}

func pay(h http.Handler, token, key, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// A second client that sends the first one's key and body gets its own
// execution, never the first one's stored payment; the first client's
// retry after a token refresh is the same operation and replays.
func TestScopeBindsKeysToThePrincipal(t *testing.T) {
	for _, c := range []struct {
		name    string
		key     string
		derived bool
	}{{"client key", "order-1", false}, {"derived key", "", true}} {
		t.Run(c.name, func(t *testing.T) {
			h, runs := authenticated(t, WithScope(ScopeFromContext(principalKey{})), WithDerivedKey(c.derived))
			body := `{"amount":100}`
			_, first := pay(h, "alice-1", c.key, body)
			_, bob := pay(h, "bob-1", c.key, body)
			_, refreshed := pay(h, "alice-2", c.key, body)
			if !strings.Contains(first, `"payment_of":"alice"`) || !strings.Contains(bob, `"payment_of":"bob"`) {
				t.Fatalf("alice got %s, bob got %s", first, bob)
			}
			if refreshed != first {
				t.Fatalf("alice's retry with a refreshed token got %s, want the replay of %s", refreshed, first)
			}
			if *runs != 2 {
				t.Fatalf("handler ran %d times, want 2 (alice once, bob once)", *runs)
			}
		})
	}
}

// A scope function that names no principal refuses the request before any
// claim, so that no key is ever stored under an empty scope.
func TestScopeMissingIsRefused(t *testing.T) {
	h, runs := authenticated(t, WithScope(ScopeFromContext(struct{ other int }{})))
	code, body := pay(h, "alice-1", "order-1", `{"amount":100}`)
	if code != http.StatusUnauthorized || !strings.Contains(body, ProblemScopeMissing) || *runs != 0 {
		t.Fatalf("got %d %s after %d runs, want 401 %s and no run", code, body, *runs, ProblemScopeMissing)
	}
	h, runs = authenticated(t, WithScope(ScopeFromContext(principalKey{})), WithStatuses(Statuses{ScopeMissing: http.StatusForbidden}))
	if code, _ := pay(h, "alice-1", "order-1", `{"amount":100}`); code != http.StatusCreated || *runs != 1 {
		t.Fatalf("a principal got %d after %d runs", code, *runs)
	}
}

// No configuration leaves the scope out silently; the single-tenant
// opt-out is explicit, and the last of the two settings wins.
func TestScopeRequired(t *testing.T) {
	store := newTestStore(t)
	for _, opts := range [][]Option{nil, {WithDerivedKey(true)}, {WithRequire(true)}} {
		if _, err := New(store, opts...); !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "WithSingleTenant()") {
			t.Fatalf("New without a scope: %v, want idem.ErrConfig naming WithScope and WithSingleTenant", err)
		}
	}
	if _, err := New(store, WithScope(nil)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("WithScope(nil): %v, want idem.ErrConfig", err)
	}
	// WithSingleTenant after WithScope: one scope for every caller.
	h, runs := authenticated(t, WithScope(ScopeFromContext(principalKey{})), WithSingleTenant())
	_, a := pay(h, "alice-1", "order-1", `{"amount":100}`)
	_, b := pay(h, "bob-1", "order-1", `{"amount":100}`)
	if a != b || *runs != 1 {
		t.Fatalf("single tenant: %s and %s after %d runs, want one execution", a, b, *runs)
	}
	// WithScope after WithSingleTenant: scoped again.
	h, runs = authenticated(t, WithSingleTenant(), WithScope(ScopeFromContext(principalKey{})))
	pay(h, "alice-1", "order-1", `{"amount":100}`)
	pay(h, "bob-1", "order-1", `{"amount":100}`)
	if *runs != 2 {
		t.Fatalf("scoped after single tenant: %d runs, want 2", *runs)
	}
}

type stringer struct{ s string }

func (s *stringer) String() string { return s.s }

func TestScopeOf(t *testing.T) {
	var nilStringer *stringer
	for _, c := range []struct {
		v    any
		want string
	}{
		{"acct_1", "acct_1"}, {&stringer{"u-7"}, "u-7"}, {int64(42), "42"}, {uint8(7), "7"},
		{nil, ""}, {nilStringer, ""}, {3.5, ""}, {[]byte("x"), ""}, {struct{}{}, ""},
	} {
		if got := ScopeOf(c.v); got != c.want {
			t.Errorf("ScopeOf(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}
