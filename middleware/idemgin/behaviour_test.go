package idemgin_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/middleware/idemtest"
	"github.com/idemkit/idem/tiered"
)

// engines are the gin setups the kit runs on: without recovery, with gin's
// defaults (Logger and Recovery), and with Recovery alone.
var engines = []struct {
	name string
	new  func() *gin.Engine
}{
	{"gin.New", func() *gin.Engine { return gin.New() }},
	{"gin.Default", func() *gin.Engine { return gin.Default() }},
	{"gin.Recovery", func() *gin.Engine { e := gin.New(); e.Use(gin.Recovery()); return e }},
}

// later turns the kit's later function into gin middleware.
func later(fn func(http.ResponseWriter, *http.Request) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !fn(c.Writer, c.Request) {
			c.Abort()
			return
		}
		c.Next()
	}
}

// stack mounts idemgin on engines from newEngine, the kit's handler on
// every route; for the chain rows, the later middleware after idemgin.
func stack(newEngine func() *gin.Engine) idemtest.Stack {
	chain := func(store *tiered.Store, opts []middleware.Option, fn func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
		mw, err := idemgin.Middleware(store, opts...)
		if err != nil {
			return nil, err
		}
		r := newEngine()
		r.Use(mw)
		if fn != nil {
			r.Use(later(fn))
		}
		r.Any("/*path", gin.WrapH(h))
		return r, nil
	}
	return idemtest.Stack{
		Mount: func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
			return chain(store, opts, nil, h)
		},
		Chain: chain,
	}
}

// TestBehaviour runs the kit on gin.New on every backend.
func TestBehaviour(t *testing.T) {
	behaviour.Run(t, stack(engines[0].new))
}

// TestEngines runs the kit on the engines that recover panics, over
// memory layers.
func TestEngines(t *testing.T) {
	for _, e := range engines[1:] {
		t.Run(e.name, func(t *testing.T) {
			s := stack(e.new)
			s.Tiers = idemtest.Memory(t)
			idemtest.Run(t, s)
		})
	}
}
