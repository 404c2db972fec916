package idemecho_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/middleware/idemtest"
	"github.com/idemkit/idem/tiered"
)

// setups are the Echo setups the kit runs on: bare, and with Echo's
// Recover before the middleware.
var setups = []struct {
	name string
	new  func() *echo.Echo
}{
	{"echo.New", echo.New},
	{"Recover", func() *echo.Echo {
		e := echo.New()
		e.Use(echomw.RecoverWithConfig(echomw.RecoverConfig{DisablePrintStack: true}))
		return e
	}},
}

// later turns the kit's later function into Echo middleware.
func later(fn func(http.ResponseWriter, *http.Request) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !fn(c.Response(), c.Request()) {
				return nil
			}
			return next(c)
		}
	}
}

// stack mounts idemecho on servers from newEcho, the kit's handler on every
// route; for the chain rows, the later middleware after idemecho.
func stack(newEcho func() *echo.Echo) idemtest.Stack {
	chain := func(store *tiered.Store, opts []middleware.Option, fn func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error) {
		mw, err := idemecho.Middleware(store, opts...)
		if err != nil {
			return nil, err
		}
		e := newEcho()
		e.Use(mw)
		if fn != nil {
			e.Use(later(fn))
		}
		e.Any("/*", echo.WrapHandler(h))
		return e, nil
	}
	return idemtest.Stack{
		Mount: func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
			return chain(store, opts, nil, h)
		},
		Chain: chain,
	}
}

// TestBehaviour runs the kit on echo.New on every backend.
func TestBehaviour(t *testing.T) {
	behaviour.Run(t, stack(setups[0].new))
}

// TestSetups runs the kit on Echo with Recover, over memory layers.
func TestSetups(t *testing.T) {
	for _, s := range setups[1:] {
		t.Run(s.name, func(t *testing.T) {
			st := stack(s.new)
			st.Tiers = idemtest.Memory(t)
			idemtest.Run(t, st)
		})
	}
}
