package idemgin_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/tiered"
)

// A retry with the same key gets the first response; the handler runs once.
func ExampleMiddleware() {
	gin.SetMode(gin.ReleaseMode)
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
	// Each key is bound to the account that authentication put in Gin's
	// context (c.Set): one account never reads another's payment.
	authenticate := func(c *gin.Context) {
		c.Set("account", strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer token-of-"))
		c.Next()
	}
	mw, err := idemgin.Middleware(store, middleware.WithScope(idemgin.ScopeFromContext("account")), middleware.WithRequire(true))
	if err != nil {
		log.Fatal(err)
	}
	r := gin.New()
	r.Use(authenticate, mw)
	r.POST("/payments", func(c *gin.Context) {
		runs++
		c.Header("Location", "/payments/1")
		c.JSON(http.StatusCreated, gin.H{"id": 1, "run": runs})
	})

	for _, key := range []string{"order-7", "order-7", ""} {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Authorization", "Bearer token-of-acct_1")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 application/json; charset=utf-8 {"id":1,"run":1}
	// 201 application/json; charset=utf-8 {"id":1,"run":1}
	// 400 application/problem+json {"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#ProblemKeyMissing","title":"Idempotency key missing","status":400,"detail":"This request must carry an idempotency key."}
	// handler runs: 1
}
