package idemgin_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
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

// A request the core passes through untouched (an unguarded method) costs
// no more than the adapter's own hand-on (its two closures): the scope's
// way to gin's context, a copy of the request, is made for guarded
// requests only.
func TestPassThroughAllocatesNothingMore(t *testing.T) {
	route := func(r *gin.Engine) *gin.Engine {
		r.GET("/payments", func(c *gin.Context) { c.Status(http.StatusOK) })
		return r
	}
	bare := route(gin.New())
	guarded := gin.New()
	guarded.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithScope(idemgin.ScopeFromContext("account"))))(t))
	route(guarded)
	// The fewest of several counts: AllocsPerRun counts the process's
	// allocations, and another test's goroutine may allocate meanwhile.
	allocs := func(h http.Handler) float64 {
		req := httptest.NewRequest(http.MethodGet, "/payments", nil)
		least := math.Inf(1)
		for range 5 {
			least = min(least, testing.AllocsPerRun(100, func() { h.ServeHTTP(httptest.NewRecorder(), req) }))
		}
		return least
	}
	if a, b := allocs(bare), allocs(guarded); b > a+2 {
		t.Fatalf("a GET through the middleware allocates %v times, %v without it", b, a)
	}
}
