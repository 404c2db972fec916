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

func TestBehaviour(t *testing.T) {
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) http.Handler {
		r := gin.New()
		r.Use(idemgin.Middleware(store, opts...))
		r.Any("/*path", gin.WrapH(h))
		return r
	})
}
