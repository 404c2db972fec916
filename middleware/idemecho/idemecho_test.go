package idemecho_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
)

type ctxKey struct{}

// TestNativeHandlers checks Echo's own ways of answering: returned errors
// (written by the error handler inside the execution), c.JSON, NoContent,
// and the request context.
func TestNativeHandlers(t *testing.T) {
	var runs atomic.Int64
	var outer []int // c.Response().Status seen by a middleware before ours
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), ctxKey{}, "from outer")))
			err := next(c)
			outer = append(outer, c.Response().Status)
			return err
		}
	})
	e.Use(must.Get(idemecho.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant()))(t))
	e.POST("/json", func(c echo.Context) error {
		c.Response().Header().Set("Location", "/p/1")
		return c.JSON(http.StatusCreated, map[string]any{"run": runs.Add(1), "ctx": c.Request().Context().Value(ctxKey{})})
	})
	e.POST("/no-content", func(c echo.Context) error { runs.Add(1); return c.NoContent(http.StatusNoContent) })
	e.POST("/not-found", func(c echo.Context) error {
		runs.Add(1)
		return echo.NewHTTPError(http.StatusNotFound, "no such payment")
	})
	e.POST("/fails", func(c echo.Context) error {
		runs.Add(1)
		return echo.NewHTTPError(http.StatusInternalServerError, "down")
	})
	e.POST("/nothing", func(c echo.Context) error { runs.Add(1); return nil })
	problem := `{"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemFailed","title":"Request failed","status":500,"detail":"The request could not be completed."}`
	for _, c := range []struct {
		path   string
		status int
		body   string
		runs   int64 // after both requests
	}{
		{"/json", http.StatusCreated, `{"ctx":"from outer","run":1}` + "\n", 1},
		{"/no-content", http.StatusNoContent, "", 2},
		{"/not-found", http.StatusNotFound, `{"message":"no such payment"}` + "\n", 3}, // a 4xx is kept
		{"/fails", http.StatusInternalServerError, `{"message":"down"}` + "\n", 5},     // released: runs again
		// A handler that answered nothing has committed nothing: a 500
		// problem, and the retry runs again.
		{"/nothing", http.StatusInternalServerError, problem, 7},
	} {
		t.Run(c.path, func(t *testing.T) {
			outer = outer[:0]
			key := "k" + c.path
			a := behaviour.Post(t, e, c.path, key)
			b := behaviour.Post(t, e, c.path, key)
			if a.Status != c.status || a.Body != c.body {
				t.Fatalf("first %d %q, want %d %q", a.Status, a.Body, c.status, c.body)
			}
			if a != b {
				t.Fatalf("second %+v, want %+v", b, a)
			}
			if runs.Load() != c.runs {
				t.Fatalf("runs %d, want %d", runs.Load(), c.runs)
			}
			if len(outer) != 2 || outer[0] != c.status || outer[1] != c.status {
				t.Fatalf("outer middleware saw %v, want [%d %d]", outer, c.status, c.status)
			}
		})
	}
}

// TestProblemThroughEcho checks that the core's own answers go through
// Echo's response, so Echo's bookkeeping sees them.
func TestProblemThroughEcho(t *testing.T) {
	var status int
	var committed bool
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			status, committed = c.Response().Status, c.Response().Committed
			return err
		}
	})
	e.Use(must.Get(idemecho.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant(), middleware.WithRequire(true)))(t))
	e.POST("/pay", func(c echo.Context) error { return c.String(http.StatusCreated, "paid") })
	got := behaviour.Post(t, e, "/pay", "")
	if got.Status != http.StatusBadRequest || got.ContentType != "application/problem+json" {
		t.Fatalf("missing key: %+v", got)
	}
	if status != http.StatusBadRequest || !committed {
		t.Fatalf("echo saw status %d committed %v", status, committed)
	}
}

// A nil store or an option given nonsense is an error, never a panic.
func TestMiddlewareRefusesNonsense(t *testing.T) {
	if _, err := idemecho.Middleware(nil); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Middleware(nil): %v, want ErrConfig", err)
	}
	if _, err := idemecho.Middleware(behaviour.MemoryStore(t), middleware.WithBodyLimit(-1)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("Middleware with a negative body limit: %v, want ErrConfig", err)
	}
}
