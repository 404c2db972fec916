package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// syncBuffer is a log destination safe for the Store's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A forgotten Init is a setup mistake, not an outage: every call fails with
// idem.ErrConfig (never ErrUnavailable, never run without a decision even
// under WithFailOpen), the error says what to do, a Store without an
// observer logs it once, and the middleware answers 500, not "retry later".
func TestMissingTableIsAConfigurationError(t *testing.T) {
	st := stacktest.Real(t)
	sql := must.Get(sqllayer.New(st.DB(t), sqllayer.WithRecordsTable(testenv.Name("idem_never_created"))))(t)
	var logged syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	for _, failOpen := range []bool{false, true} {
		s := newStore(t, tiered.WithSQL(sql), tiered.WithFailOpen(failOpen))
		var c counter
		for range 3 {
			_, err := s.Do(context.Background(), newKey(t), "fp", c.fn("ran"))
			if !errors.Is(err, idem.ErrConfig) || errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("fail open %v: %v; want ErrConfig and not ErrUnavailable", failOpen, err)
			}
			if !strings.Contains(err.Error(), "Init") {
				t.Fatalf("the error does not say what to do: %v", err)
			}
		}
		if c.runs.Load() != 0 {
			t.Fatalf("fail open %v: the work ran %d times without a decision", failOpen, c.runs.Load())
		}
	}
	if n := strings.Count(logged.String(), "every call that needs this tier fails"); n != 2 {
		t.Fatalf("logged %d times, want once per Store:\n%s", n, logged.String())
	}
	s := newStore(t, tiered.WithSQL(sql))
	h := must.Get(middleware.New(s, middleware.WithSingleTenant()))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran without a decision")
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("middleware answered %d (Retry-After %q), want 500 without Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
}
