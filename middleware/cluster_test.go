package middleware_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Three instances over one Redis and one database: 200 rounds of 20
// identical concurrent POSTs run the handler once per round.
func TestThreeInstances(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	behaviour.RunCluster(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		return mw(h), nil
	}, rounds)
}
