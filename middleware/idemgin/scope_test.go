package idemgin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
)

// The principal lives where Gin's authentication puts it, c.Set: a second
// account that sends the first one's key and body gets its own payment,
// the first account's retry after a token refresh replays, and a request
// whose account is unknown is refused before any claim.
func TestScopeFromGinContext(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  middleware.Option
	}{
		{"ScopeFromContext", middleware.WithScope(idemgin.ScopeFromContext("account"))},
		{"ScopeFunc", middleware.WithScope(idemgin.ScopeFunc(func(c *gin.Context) string { return c.GetString("account") }))},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			r := gin.New()
			r.Use(func(c *gin.Context) { // authentication
				if account := behaviour.AccountOf[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]; account != "" {
					c.Set("account", account)
				}
				c.Next()
			})
			r.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), c.opt))(t))
			r.POST("/payments", func(c *gin.Context) {
				runs++
				c.String(http.StatusCreated, fmt.Sprintf(`{"payment_of":%q,"run":%d}`, c.GetString("account"), runs))
			})
			behaviour.CheckScope(t, r, func() int { return runs })
		})
	}
	if _, err := idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithScope(nil)); err == nil {
		t.Fatal("WithScope(nil) accepted")
	}
	if _, err := idemgin.Middleware(behaviour.MemoryStore(t)); err == nil || !strings.Contains(err.Error(), "WithSingleTenant") {
		t.Fatalf("no scope: %v, want a refusal naming WithSingleTenant", err)
	}
}
