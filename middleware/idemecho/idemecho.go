package idemecho

import (
	"context"
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
			// The core sees the request; WithScope's function reads
			// Echo's context (c.Get) through it.
			if h.Guards(c.Request().Method) { // a request passed through untouched needs none of it
				c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), echoKey{}, c)))
			}
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

// echoKey is the request context's key of the echo.Context the core
// serves.
type echoKey struct{}

// ScopeFunc returns a scope function for middleware.WithScope that names
// the principal (tenant, account or user) from Echo's context, as scope
// reads it there: what authentication middleware before this one found.
// The rules are middleware.WithScope's: "" refuses the request with
// middleware.ProblemScopeMissing, and the principal is named by a stable
// id, never by a credential that rotates. It reads Echo's context only
// behind this package's Middleware; elsewhere it names no principal.
func ScopeFunc(scope func(c echo.Context) string) func(r *http.Request) string {
	return func(r *http.Request) string {
		c, ok := r.Context().Value(echoKey{}).(echo.Context)
		if !ok || scope == nil {
			return "" // not served by this package's Middleware
		}
		return scope(c)
	}
}

// ScopeFromContext returns a scope function for middleware.WithScope that
// reads the principal that authentication middleware set under key in
// Echo's context (c.Set(key, …)), as middleware.ScopeOf reads it: a
// string, a fmt.Stringer or an integer; no value, or one of another type,
// refuses the request with middleware.ProblemScopeMissing.
//
//	mw, err := idemecho.Middleware(store, middleware.WithScope(idemecho.ScopeFromContext("account")))
func ScopeFromContext(key string) func(r *http.Request) string {
	return ScopeFunc(func(c echo.Context) string {
		v := c.Get(key)
		return middleware.ScopeOf(v)
	})
}
