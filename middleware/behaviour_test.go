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
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		return mw(h), nil
	})
}

func TestBehaviourChi(t *testing.T) {
	behaviour.Run(t, func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		mw, err := middleware.New(store, opts...)
		if err != nil {
			return nil, err
		}
		r := chi.NewRouter()
		r.Use(mw)
		r.Handle("/*", h)
		return r, nil
	})
}
