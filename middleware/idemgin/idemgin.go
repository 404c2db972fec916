package idemgin

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Middleware returns Gin middleware that executes each guarded request once
// per key, with the options of package middleware. Its errors are those of
// middleware.NewHandler: a nil store or options given nonsense, wrapping
// idem.ErrConfig.
func Middleware(store *tiered.Store, opts ...middleware.Option) (gin.HandlerFunc, error) {
	h, err := middleware.NewHandler(store, opts...)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		// The core sees the request; WithScope's function reads gin's
		// context (c.Get) through it. A request the core passes through
		// untouched needs none of it.
		if h.Guards(c.Request.Method) {
			c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), ginKey{}, c))
		}
		orig, origReq := c.Writer, c.Request
		// Gin's handler loop goes on with the handler after the one that
		// last ran unless the chain is aborted. So unless the core passed
		// the request through untouched, or ran the rest of the chain to
		// its end, the chain is aborted: after a replay, a problem, or a
		// panic in a later handler that the core recovered (gin's index
		// then points at the handler that panicked) or turned into a cut
		// connection, nothing after this middleware may run.
		passed, finished := false, false
		defer func() {
			if !passed && !finished {
				c.Abort()
			}
		}()
		h.Serve(orig, origReq, func(w http.ResponseWriter, r *http.Request) {
			if w == http.ResponseWriter(orig) && r == origReq {
				passed = true
				c.Next() // passed through untouched
				return
			}
			// The status gin would send if no handler writes: 200, or the
			// 404 or 405 gin set before running the chain for a route it
			// does not know.
			gw := &writer{w: w, orig: orig, status: orig.Status(), size: -1}
			c.Writer, c.Request = gw, r
			defer func() { c.Writer, c.Request = orig, origReq }()
			c.Next()
			finished = true // gin's loop ran to the end, or a handler aborted it
			if gw.set || gw.status != http.StatusOK {
				// As gin's engine does after the last handler: a status a
				// handler set (c.Status), or gin's own 404 or 405, is an
				// answer. A handler that set nothing and wrote nothing
				// (it returned after c.Error, say) has answered nothing:
				// the core keeps nothing and answers a 500 problem, where
				// gin would send an empty 200.
				gw.WriteHeaderNow()
			}
		})
	}, nil
}

// ginKey is the request context's key of the gin.Context the core serves.
type ginKey struct{}

// ScopeFunc returns a scope function for middleware.WithScope that names
// the principal (tenant, account or user) from Gin's context, as scope
// reads it there: what authentication middleware before this one found.
// The rules are middleware.WithScope's: "" refuses the request with
// middleware.ProblemScopeMissing, and the principal is named by a stable
// id, never by a credential that rotates. It reads Gin's context only
// behind this package's Middleware; elsewhere it names no principal.
func ScopeFunc(scope func(c *gin.Context) string) func(r *http.Request) string {
	return func(r *http.Request) string {
		c, ok := r.Context().Value(ginKey{}).(*gin.Context)
		if !ok || scope == nil {
			return "" // not served by this package's Middleware
		}
		return scope(c)
	}
}

// ScopeFromContext returns a scope function for middleware.WithScope that
// reads the principal that authentication middleware set under key in
// Gin's context (c.Set(key, …)), as middleware.ScopeOf reads it: a
// string, a fmt.Stringer or an integer; no value, or one of another type,
// refuses the request with middleware.ProblemScopeMissing.
//
//	mw, err := idemgin.Middleware(store, middleware.WithScope(idemgin.ScopeFromContext("account")))
func ScopeFromContext(key string) func(r *http.Request) string {
	return ScopeFunc(func(c *gin.Context) string {
		v, _ := c.Get(key)
		return middleware.ScopeOf(v)
	})
}
