package idemgin

import (
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
