package middleware_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// retryRig is a handler behind the middleware (built by netHTTP) whose
// first execution of a key waits for release: enough to produce every
// problem that tells a retry apart.
func retryRig(t *testing.T, opts ...middleware.Option) (h http.Handler, started <-chan struct{}, release func()) {
	t.Helper()
	store, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	gate, began := make(chan struct{}), make(chan struct{}, 1)
	h, err = netHTTP(store, append([]middleware.Option{middleware.WithSingleTenant()}, opts...), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			began <- struct{}{}
			<-gate
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	release = func() {
		if !closed {
			closed = true
			close(gate)
		}
	}
	t.Cleanup(release)
	return h, began, release
}

func postKey(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every problem says whether a retry can help: in flight and unavailable
// yes (with Retry-After), a malformed key, a mismatch and a tombstone no.
func TestShouldRetryHeader(t *testing.T) {
	h, started, release := retryRig(t)
	if rec := postKey(h, "/", "k1", `{"a":1}`); rec.Code != 201 || rec.Header().Get(middleware.DefaultShouldRetryHeader) != "" {
		t.Fatalf("a handler's answer: %d, should-retry %q", rec.Code, rec.Header().Get(middleware.DefaultShouldRetryHeader))
	}
	rec := postKey(h, "/", "k1", `{"a":2}`)
	if rec.Code != 422 || rec.Header().Get(middleware.DefaultShouldRetryHeader) != "false" {
		t.Fatalf("mismatch: %d, should-retry %q", rec.Code, rec.Header().Get(middleware.DefaultShouldRetryHeader))
	}
	rec = postKey(h, "/", "a,b", `{}`)
	if rec.Code != 400 || rec.Header().Get(middleware.DefaultShouldRetryHeader) != "false" {
		t.Fatalf("malformed key: %d, should-retry %q", rec.Code, rec.Header().Get(middleware.DefaultShouldRetryHeader))
	}
	done := make(chan struct{})
	go func() { defer close(done); postKey(h, "/slow", "k2", `{}`) }()
	<-started // the first request holds the key
	if rec = postKey(h, "/slow", "k2", `{}`); rec.Code != 409 || rec.Header().Get(middleware.DefaultShouldRetryHeader) != "true" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("in flight: %d, should-retry %q, Retry-After %q", rec.Code, rec.Header().Get(middleware.DefaultShouldRetryHeader), rec.Header().Get("Retry-After"))
	}
	release()
	<-done

	off, _, _ := retryRig(t, middleware.WithShouldRetryHeader(""))
	postKey(off, "/", "k", `{"a":1}`)
	if rec := postKey(off, "/", "k", `{"a":2}`); len(rec.Header()[middleware.DefaultShouldRetryHeader]) != 0 {
		t.Fatalf("turned off, yet %q", rec.Header().Get(middleware.DefaultShouldRetryHeader))
	}
	if _, err := middleware.New(nil, middleware.WithShouldRetryHeader("a b")); err == nil {
		t.Fatal("a header name with a space was accepted")
	}
}

// ShouldRetry's table, the tombstone of a released execution included.
func TestProblemShouldRetry(t *testing.T) {
	for _, tc := range []struct {
		p            middleware.Problem
		retry, known bool
	}{
		{middleware.Problem{Type: middleware.ProblemInFlight}, true, true},
		{middleware.Problem{Type: middleware.ProblemUnavailable}, true, true},
		{middleware.Problem{Type: middleware.ProblemMismatch}, false, true},
		{middleware.Problem{Type: middleware.ProblemKeyMissing}, false, true},
		{middleware.Problem{Type: middleware.ProblemBodyTooLarge}, false, true},
		{middleware.Problem{Type: middleware.ProblemNotReplayable, Status: 409, OriginalStatus: 200}, false, true},
		{middleware.Problem{Type: middleware.ProblemNotReplayable, Status: 500, OriginalStatus: 500}, false, false},
		{middleware.Problem{Type: middleware.ProblemFailed}, false, false},
		{middleware.Problem{Type: "about:blank"}, false, false},
	} {
		if r, k := tc.p.ShouldRetry(); r != tc.retry || k != tc.known {
			t.Errorf("%s %d/%d: %v %v, want %v %v", tc.p.Type, tc.p.Status, tc.p.OriginalStatus, r, k, tc.retry, tc.known)
		}
	}
}

// WriteStripeError writes Stripe's error shape and header, which stripe-go
// needs both of to stop retrying.
func TestWriteStripeError(t *testing.T) {
	h, _, _ := retryRig(t, middleware.WithErrorWriter(middleware.WriteStripeError))
	postKey(h, "/", "k", `{"a":1}`)
	rec := postKey(h, "/", "k", `{"a":2}`)
	var body struct {
		Error struct{ Type, Code, Message, DocURL string } `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 422 || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Stripe-Should-Retry") != "false" ||
		body.Error.Type != "idempotency_error" || body.Error.Code != "mismatch" || body.Error.Message == "" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	var doc struct {
		Error struct {
			DocURL string `json:"doc_url"`
		} `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &doc)
	if doc.Error.DocURL != middleware.ProblemMismatch {
		t.Fatalf("doc_url %q", doc.Error.DocURL)
	}
}
