package idemecho_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/tiered"
)

func TestBehaviour(t *testing.T) {
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		e := echo.New()
		mw, err := idemecho.Middleware(store, opts...)
		if err != nil {
			return nil, err
		}
		e.Use(mw)
		e.Any("/*", echo.WrapHandler(h))
		return e, nil
	})
}
