package idemecho_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
)

// The principal lives where Echo's authentication puts it, c.Set: a second
// account that sends the first one's key and body gets its own payment,
// the first account's retry after a token refresh replays, and a request
// whose account is unknown is refused before any claim.
func TestScopeFromEchoContext(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  middleware.Option
	}{
		{"ScopeFromContext", middleware.WithScope(idemecho.ScopeFromContext("account"))},
		{"ScopeFunc", middleware.WithScope(idemecho.ScopeFunc(func(c echo.Context) string { s, _ := c.Get("account").(string); return s }))},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			e := echo.New()
			e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // authentication
				return func(c echo.Context) error {
					if account := behaviour.AccountOf[strings.TrimPrefix(c.Request().Header.Get("Authorization"), "Bearer ")]; account != "" {
						c.Set("account", account)
					}
					return next(c)
				}
			})
			e.Use(must.Get(idemecho.Middleware(behaviour.MemoryStore(t), c.opt))(t))
			e.POST("/payments", func(c echo.Context) error {
				runs++
				return c.String(http.StatusCreated, fmt.Sprintf(`{"payment_of":%q,"run":%d}`, c.Get("account"), runs))
			})
			behaviour.CheckScope(t, e, func() int { return runs })
		})
	}
	if _, err := idemecho.Middleware(behaviour.MemoryStore(t), middleware.WithScope(nil)); err == nil {
		t.Fatal("WithScope(nil) accepted")
	}
	if _, err := idemecho.Middleware(behaviour.MemoryStore(t)); err == nil || !strings.Contains(err.Error(), "WithSingleTenant") {
		t.Fatalf("no scope: %v, want a refusal naming WithSingleTenant", err)
	}
}
