// Package idemgin adapts package middleware to Gin: retried requests that
// carry an Idempotency-Key execute once, and every retry gets the first
// response again.
//
//	r := gin.New()
//	r.Use(idemgin.Middleware(store, middleware.WithScope(tenantOf)))
//
// The adapter translates only: every decision, status code and option is
// package middleware's, documented there (the behaviour table, the key
// grammar, what is stored, tombstones). It hands the core the request and
// gin's writer, and when the core runs the rest of the chain it sets
// c.Request and c.Writer to the request and a gin.ResponseWriter over the
// core's writer, calls c.Next, then puts the originals back. Handlers after
// the middleware therefore see the Store's work context through
// c.Request.Context(); the *gin.Context itself is never used as a context.
//
// When the core answers without running the chain (a replay, a problem) the
// middleware aborts the chain. A panic in a later handler is handled by the
// core, not by gin's Recovery, because those handlers run in the Store's
// execution.
package idemgin
