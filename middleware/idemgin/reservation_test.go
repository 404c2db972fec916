package idemgin_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/tiered"
)

// A Gin handler reads its reservation from c.Request.Context() and
// completes it in its own transaction, behind gin.Default's recovery.
func TestReservation(t *testing.T) {
	behaviour.RunReservation(t, func(store *tiered.Store, serve behaviour.Serve) (http.Handler, error) {
		mw, err := idemgin.Middleware(store, middleware.WithSingleTenant())
		if err != nil {
			return nil, err
		}
		r := gin.New()
		r.Use(gin.Recovery(), mw)
		r.POST("/charge/:id", func(c *gin.Context) {
			serve(c.Request.Context(), c.Writer, c.Param("id"))
		})
		return r, nil
	})
}
