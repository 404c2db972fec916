package idemgin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Middleware returns Gin middleware that executes each guarded request once
// per key, with the options of package middleware. It panics when store is
// nil.
func Middleware(store *tiered.Store, opts ...middleware.Option) gin.HandlerFunc {
	h := middleware.NewHandler(store, opts...)
	return func(c *gin.Context) {
		orig, origReq := c.Writer, c.Request
		ran := false
		h.Serve(orig, origReq, func(w http.ResponseWriter, r *http.Request) {
			ran = true
			if w == http.ResponseWriter(orig) && r == origReq {
				c.Next() // passed through untouched
				return
			}
			gw := &writer{w: w, orig: orig, status: http.StatusOK, size: -1}
			c.Writer, c.Request = gw, r
			defer func() { c.Writer, c.Request = orig, origReq }()
			c.Next()
			gw.WriteHeaderNow() // as gin's engine does after the last handler
		})
		if !ran {
			c.Abort()
		}
	}
}
