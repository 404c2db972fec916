package idemgin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/tiered"
)

func newStore(t *testing.T) *tiered.Store {
	t.Helper()
	s, err := tiered.New(tiered.WithSQL(memlayer.New()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type result struct {
	status int
	ct     string
	body   string
}

func post(t *testing.T, h http.Handler, path, key string) result {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return result{rec.Code, rec.Header().Get("Content-Type"), string(b)}
}

type ctxKey struct{}

// TestNativeHandlers checks gin's own ways of answering: deferred status,
// WriteHeaderNow at the end of the chain, aborts, and the request context.
func TestNativeHandlers(t *testing.T) {
	var runs atomic.Int64
	var outer []int // c.Writer.Status() seen by a middleware before ours
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), ctxKey{}, "from outer"))
		c.Next()
		outer = append(outer, c.Writer.Status())
	})
	r.Use(idemgin.Middleware(newStore(t)))
	r.POST("/json", func(c *gin.Context) {
		c.Header("Location", "/p/"+strconv.FormatInt(runs.Add(1), 10))
		c.JSON(http.StatusCreated, gin.H{"run": runs.Load(), "ctx": c.Request.Context().Value(ctxKey{})})
	})
	r.POST("/status-only", func(c *gin.Context) { runs.Add(1); c.Status(http.StatusAccepted) })
	r.POST("/last-status-wins", func(c *gin.Context) {
		c.Status(http.StatusAccepted)
		c.String(http.StatusOK, "run %d", runs.Add(1))
	})
	r.POST("/abort", func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"run": runs.Add(1)})
	})
	for _, c := range []struct {
		path   string
		status int
		body   string
		runs   int64 // after both requests
	}{
		{"/json", http.StatusCreated, `{"ctx":"from outer","run":1}`, 1},
		{"/status-only", http.StatusAccepted, "", 2},
		{"/last-status-wins", http.StatusOK, "run 3", 3},
		{"/abort", http.StatusInternalServerError, `{"run":4}`, 5}, // released: runs again
	} {
		t.Run(c.path, func(t *testing.T) {
			outer = outer[:0]
			key := "k" + c.path
			a := post(t, r, c.path, key)
			b := post(t, r, c.path, key)
			if a.status != c.status || a.body != c.body {
				t.Fatalf("first %d %q, want %d %q", a.status, a.body, c.status, c.body)
			}
			if c.status < 500 && a != b {
				t.Fatalf("replay %+v, want %+v", b, a)
			}
			if runs.Load() != c.runs {
				t.Fatalf("runs %d, want %d", runs.Load(), c.runs)
			}
			if len(outer) != 2 || outer[0] != c.status || outer[1] != b.status {
				t.Fatalf("outer middleware saw %v, want [%d %d]", outer, c.status, b.status)
			}
		})
	}
}

// TestAbortsChain checks that handlers after the middleware never run for a
// replay or a problem.
func TestAbortsChain(t *testing.T) {
	var runs atomic.Int64
	r := gin.New()
	r.Use(idemgin.Middleware(newStore(t), middleware.WithRequire(true)))
	r.POST("/pay", func(c *gin.Context) { c.String(http.StatusCreated, "run %d", runs.Add(1)) })
	post(t, r, "/pay", "k1")
	if got := post(t, r, "/pay", "k1"); got.body != "run 1" {
		t.Fatalf("replay %q", got.body)
	}
	if got := post(t, r, "/pay", ""); got.status != http.StatusBadRequest || got.ct != "application/problem+json" {
		t.Fatalf("missing key: %+v", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}
