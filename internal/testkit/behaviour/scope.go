package behaviour

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
)

// AccountOf maps the scope checks' bearer tokens to accounts, as a
// service's authentication does: acme has two tokens (a refresh mints a
// new one), a token missing here names no account.
var AccountOf = map[string]string{"acme-1": "acme", "acme-2": "acme", "globex-1": "globex"}

// CheckScope sends the scope checks' requests to h, a stack whose
// authentication sets the account of the bearer token (AccountOf) where
// the stack's scope option reads it, and whose POST /payments handler
// answers with that account and counts its runs (runs reads the count).
// A second account that sends the first one's key and body gets its own
// payment, the first account's retry after a token refresh replays, and a
// request with no account is refused before any claim.
func CheckScope(t *testing.T, h http.Handler, runs func() int) {
	t.Helper()
	pay := func(token string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	_, first := pay("acme-1")
	_, other := pay("globex-1")
	_, refreshed := pay("acme-2")
	if !strings.Contains(first, `"acme"`) || !strings.Contains(other, `"globex"`) || refreshed != first {
		t.Fatalf("acme got %s, globex %s, acme after a refresh %s", first, other, refreshed)
	}
	if code, body := pay("nobody"); code != http.StatusUnauthorized || !strings.Contains(body, middleware.ProblemScopeMissing) {
		t.Fatalf("no account: %d %s, want 401 %s", code, body, middleware.ProblemScopeMissing)
	}
	if n := runs(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}
