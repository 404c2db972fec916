package idemgin_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
)

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
	r.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant()))(t))
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
	r.POST("/error-only", func(c *gin.Context) {
		runs.Add(1)
		_ = c.Error(errors.New("charge failed")) // and writes nothing
	})
	r.POST("/nothing", func(c *gin.Context) { runs.Add(1) })
	problem := `{"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemFailed","title":"Request failed","status":500,"detail":"The request could not be completed."}`
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
		// A handler that answered nothing has committed nothing: a 500
		// problem, not gin's empty 200, and the retry runs again.
		{"/error-only", http.StatusInternalServerError, problem, 7},
		{"/nothing", http.StatusInternalServerError, problem, 9},
	} {
		t.Run(c.path, func(t *testing.T) {
			outer = outer[:0]
			key := "k" + c.path
			a := behaviour.Post(t, r, c.path, key)
			b := behaviour.Post(t, r, c.path, key)
			if a.Status != c.status || a.Body != c.body {
				t.Fatalf("first %d %q, want %d %q", a.Status, a.Body, c.status, c.body)
			}
			if c.status < 500 && a != b {
				t.Fatalf("replay %+v, want %+v", b, a)
			}
			if runs.Load() != c.runs {
				t.Fatalf("runs %d, want %d", runs.Load(), c.runs)
			}
			if len(outer) != 2 || outer[0] != c.status || outer[1] != b.Status {
				t.Fatalf("outer middleware saw %v, want [%d %d]", outer, c.status, b.Status)
			}
		})
	}
}

// TestAbortsChain checks that handlers after the middleware never run for a
// replay or a problem.
func TestAbortsChain(t *testing.T) {
	var runs atomic.Int64
	r := gin.New()
	r.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant(), middleware.WithRequire(true)))(t))
	r.POST("/pay", func(c *gin.Context) { c.String(http.StatusCreated, "run %d", runs.Add(1)) })
	behaviour.Post(t, r, "/pay", "k1")
	if got := behaviour.Post(t, r, "/pay", "k1"); got.Body != "run 1" {
		t.Fatalf("replay %q", got.Body)
	}
	if got := behaviour.Post(t, r, "/pay", ""); got.Status != http.StatusBadRequest || got.ContentType != "application/problem+json" {
		t.Fatalf("missing key: %+v", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

// TestUnknownRoute checks that the status gin sets before running the
// chain for a route it does not know (404) is what the core records, never
// a 200 made up by the adapter. The leader gets gin's own text; a retry
// gets the status with the body the chain wrote, none.
func TestUnknownRoute(t *testing.T) {
	var runs atomic.Int64
	r := gin.New()
	r.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant()))(t), func(*gin.Context) { runs.Add(1) })
	r.POST("/pay", func(c *gin.Context) { c.String(http.StatusCreated, "paid") })
	a, b := behaviour.Post(t, r, "/nope", "k"), behaviour.Post(t, r, "/nope", "k")
	if a.Status != http.StatusNotFound || a.Body != "404 page not found" || b.Status != http.StatusNotFound || runs.Load() != 1 {
		t.Fatalf("answers %+v and %+v, chain ran %d times; want 404 twice, once", a, b, runs.Load())
	}
}

// A nil store or an option given nonsense is an error, never a panic.
func TestMiddlewareRefusesNonsense(t *testing.T) {
	if _, err := idemgin.Middleware(nil); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Middleware(nil): %v, want ErrConfig", err)
	}
	if _, err := idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithBodyLimit(-1)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Middleware with a negative body limit: %v, want ErrConfig", err)
	}
}
