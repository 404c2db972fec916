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

// An Echo handler reads its reservation from c.Request().Context() and
// completes it in its own transaction, behind Echo's Recover.
func TestReservation(t *testing.T) {
	behaviour.RunReservation(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := idemecho.Middleware(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		e := echo.New()
		e.Use(echomw.Recover(), mw)
		e.POST("/charge/:id", func(c echo.Context) error {
			serve(c.Request().Context(), c.Response(), c.Param("id"))
			return nil
		})
		return e, nil
	})
}
