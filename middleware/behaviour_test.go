package middleware_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

func TestBehaviourNetHTTP(t *testing.T) {
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) http.Handler {
		return middleware.New(store, opts...)(h)
	})
}

func TestBehaviourChi(t *testing.T) {
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) http.Handler {
		r := chi.NewRouter()
		r.Use(middleware.New(store, opts...))
		r.Handle("/*", h)
		return r
	})
}
