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

// engines are the gin setups every chain and cut test runs on: without
// recovery, with gin's defaults (Logger and Recovery), and with Recovery
// alone.
var engines = []struct {
	name string
	new  func() *gin.Engine
}{
	{"gin.New", func() *gin.Engine { return gin.New() }},
	{"gin.Default", func() *gin.Engine { return gin.Default() }},
	{"gin.Recovery", func() *gin.Engine { e := gin.New(); e.Use(gin.Recovery()); return e }},
}

func TestCuts(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			behaviour.RunCuts(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
				r := e.new()
				mw, err := idemgin.Middleware(store, opts...)
				if err != nil {
					return nil, err
				}
				r.Use(mw)
				r.Any("/*path", gin.WrapH(h))
				return r, nil
			})
		})
	}
}
