package idemecho_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/tiered"
)

// A retry with the same key gets the first response; the handler runs once.
// A returned error is the response too: a 5xx releases the key.
func ExampleMiddleware() {
	mem, err := memlayer.New()
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	runs := 0
	// Each key is bound to the account that authentication put in Echo's
	// context (c.Set): one account never reads another's payment.
	authenticate := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set("account", strings.TrimPrefix(c.Request().Header.Get("Authorization"), "Bearer token-of-"))
			return next(c)
		}
	}
	mw, err := idemecho.Middleware(store, middleware.WithScope(idemecho.ScopeFromContext("account")))
	if err != nil {
		log.Fatal(err)
	}
	e := echo.New()
	e.Use(authenticate, mw)
	e.POST("/payments", func(c echo.Context) error {
		runs++
		if runs == 1 {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "bank offline")
		}
		c.Response().Header().Set("Location", "/payments/1")
		return c.JSON(http.StatusCreated, map[string]int{"id": 1, "run": runs})
	})

	for range 3 {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Authorization", "Bearer token-of-acct_1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-7")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 503 {"message":"bank offline"}
	// 201 {"id":1,"run":2}
	// 201 {"id":1,"run":2}
	// handler runs: 2
}
