package idemecho_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
)

// TestLaterReturnsError checks that an error a later middleware returns
// instead of handing on is Echo's answer, judged like any response: a 4xx
// is stored and replayed, anything else releases the key; the handler
// never runs.
func TestLaterReturnsError(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		status int
		later  int64 // runs of the later middleware after two requests
	}{
		{"http error 401", echo.NewHTTPError(http.StatusUnauthorized, "who are you"), http.StatusUnauthorized, 1},
		{"plain error", errors.New("boom"), http.StatusInternalServerError, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var later, runs atomic.Int64
			e := echo.New()
			e.Use(must.Get(idemecho.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant()))(t), func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(echo.Context) error { later.Add(1); return c.err }
			})
			e.POST("/pay", func(c echo.Context) error { return c.String(http.StatusCreated, fmt.Sprint(runs.Add(1))) })
			a, b := behaviour.Post(t, e, "/pay", "k"), behaviour.Post(t, e, "/pay", "k")
			if a.Status != c.status || a != b || later.Load() != c.later || runs.Load() != 0 {
				t.Fatalf("answers %+v and %+v, later middleware ran %d times, handler %d; want %d, %d and 0",
					a, b, later.Load(), runs.Load(), c.status, c.later)
			}
		})
	}
}
