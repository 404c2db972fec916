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
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		r := gin.New()
		mw, err := idemgin.Middleware(store, opts...)
		if err != nil {
			return nil, err
		}
		r.Use(mw)
		r.Any("/*path", gin.WrapH(h))
		return r, nil
	})
}
