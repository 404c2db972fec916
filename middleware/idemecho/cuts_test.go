package idemecho_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/tiered"
)

// setups are the Echo setups every chain and cut test runs on: bare, and
// with Echo's Recover before the middleware.
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

func TestCuts(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			behaviour.RunCuts(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
				e := s.new()
				mw, err := idemecho.Middleware(store, opts...)
				if err != nil {
					return nil, err
				}
				e.Use(mw)
				e.Any("/*", echo.WrapHandler(h))
				return e, nil
			})
		})
	}
}
