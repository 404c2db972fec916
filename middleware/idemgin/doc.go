// Package idemgin adapts package middleware to Gin: retried requests that
// carry an Idempotency-Key execute once, and every retry gets the first
// response again.
//
//	// The account your authentication middleware set with c.Set("account", …).
//	mw, err := idemgin.Middleware(store, middleware.WithScope(idemgin.ScopeFromContext("account")))
//	if err != nil {
//		return err
//	}
//	r := gin.New()
//	r.Use(authenticate, mw)
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
// Unless the core passed the request through untouched, the middleware
// aborts the chain (c.Abort) whenever the rest of it did not run to its end:
// after a replay or a problem, and after a later handler panicked. No
// handler then runs outside the execution or after the answer. A request
// passed through meets the chain exactly as without the middleware.
//
// A panic in a later handler is handled by the core, not by gin's Recovery,
// because those handlers run in the Store's execution: the client gets 500
// ProblemFailed, or a cut connection when the response had begun, which
// gin's Recovery can no longer turn into a complete-looking response. Put
// Recovery before the middleware, as gin.Default does: after it, Recovery
// turns a panic into an ordinary response, and one that had begun is then
// kept as it was sent, truncated.
package idemgin
