package idemecho_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
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
	e.Use(idemecho.Middleware(newStore(t)))
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
	} {
		t.Run(c.path, func(t *testing.T) {
			outer = outer[:0]
			key := "k" + c.path
			a := post(t, e, c.path, key)
			b := post(t, e, c.path, key)
			if a.status != c.status || a.body != c.body {
				t.Fatalf("first %d %q, want %d %q", a.status, a.body, c.status, c.body)
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
	e.Use(idemecho.Middleware(newStore(t), middleware.WithRequire(true)))
	e.POST("/pay", func(c echo.Context) error { return c.String(http.StatusCreated, "paid") })
	got := post(t, e, "/pay", "")
	if got.status != http.StatusBadRequest || got.ct != "application/problem+json" {
		t.Fatalf("missing key: %+v", got)
	}
	if status != http.StatusBadRequest || !committed {
		t.Fatalf("echo saw status %d committed %v", status, committed)
	}
}
