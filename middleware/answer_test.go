package middleware

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/testkit/must"
)

type answerLog struct {
	mu  sync.Mutex
	got []string
}

func (l *answerLog) ObserveAnswer(_ *http.Request, a Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf("%s/%d/%s", a.Kind, a.Status, a.Problem))
}

// Every request is heard once, with how it was answered: passed on,
// executed, replayed, or one of the middleware's own problems by name.
func TestAnswerObserverHearsEveryAnswer(t *testing.T) {
	log := &answerLog{}
	mw := must.Get(New(newTestStore(t), WithSingleTenant(), WithAnswerObserver(log)))(t)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	send := func(method, key, body string) int {
		req := httptest.NewRequest(method, "/pay", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	send(http.MethodGet, "k", "")
	send(http.MethodPost, "", `{"a":1}`)
	send(http.MethodPost, "k", `{"a":1}`)
	send(http.MethodPost, "k", `{"a":1}`)
	send(http.MethodPost, "k", `{"a":2}`)
	send(http.MethodPost, "bad key\x01", `{"a":1}`)
	send(http.MethodPost, "k2", `{"a":`)
	want := []string{
		"passed/0/", "passed/0/",
		"executed/201/", "replayed/201/",
		"problem/422/mismatch", "problem/400/key_malformed", "problem/400/body_invalid",
	}
	if strings.Join(log.got, " ") != strings.Join(want, " ") {
		t.Fatalf("answers\n got %v\nwant %v", log.got, want)
	}
}

// Each problem has a name, and no two share one except the two kinds
// that answer the same problem type.
func TestProblemNames(t *testing.T) {
	seen := map[string]int{}
	for _, n := range problemNames {
		if n == "" || strings.ContainsAny(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ ") {
			t.Fatalf("problem name %q", n)
		}
		seen[n]++
	}
	if seen["unavailable"] != 2 || len(seen) != len(problemNames)-1 {
		t.Fatalf("names %v", problemNames)
	}
}

func TestWithAnswerObserverNil(t *testing.T) {
	if _, err := New(newTestStore(t), WithAnswerObserver(nil)); err == nil {
		t.Fatal("nil observer accepted")
	}
}
