package behaviour

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// MemoryStore returns a Store over a memory layer, closed when the test
// ends: what an adapter's own tests need to reach the core.
func MemoryStore(t testing.TB) *tiered.Store {
	t.Helper()
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Result is what a client sees of one answer.
type Result struct {
	Status      int
	ContentType string
	Body        string
}

// Post sends a small JSON POST to path through h, with key as its
// Idempotency-Key unless empty.
func Post(t testing.TB, h http.Handler, path, key string) Result {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return Result{rec.Code, rec.Header().Get("Content-Type"), string(b)}
}
