package idemecho

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Middleware returns Echo middleware that executes each guarded request once
// per key, with the options of package middleware. Its errors are those of
// middleware.NewHandler: a nil store or options given nonsense, wrapping
// idem.ErrConfig.
func Middleware(store *tiered.Store, opts ...middleware.Option) (echo.MiddlewareFunc, error) {
	h, err := middleware.NewHandler(store, opts...)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res, req := c.Response(), c.Request()
			var err error
			h.Serve(res, req, func(w http.ResponseWriter, r *http.Request) {
				if w == http.ResponseWriter(res) && r == req {
					err = next(c) // passed through untouched
					return
				}
				c.SetResponse(echo.NewResponse(w, c.Echo()))
				c.SetRequest(r)
				defer func() { c.SetResponse(res); c.SetRequest(req) }()
				if herr := next(c); herr != nil {
					c.Error(herr) // write the error response inside the execution
				}
			})
			return err
		}
	}, nil
}
