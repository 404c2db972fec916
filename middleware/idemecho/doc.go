// Package idemecho adapts package middleware to Echo (v4): retried requests
// that carry an Idempotency-Key execute once, and every retry gets the first
// response again.
//
//	// The account your authentication middleware set with c.Set("account", …).
//	mw, err := idemecho.Middleware(store, middleware.WithScope(idemecho.ScopeFromContext("account")))
//	if err != nil {
//		return err
//	}
//	e := echo.New()
//	e.Use(authenticate, mw)
//
// The adapter translates only: every decision, status code and option is
// package middleware's, documented there (the behaviour table, the key
// grammar, what is stored, tombstones). It hands the core the request and
// c.Response(), and when the core runs the rest of the chain it gives the
// context the core's request and a fresh *echo.Response over the core's
// writer, calls next, then puts the originals back. Handlers after the
// middleware therefore see the Store's work context through
// c.Request().Context().
//
// An error returned by the rest of the chain is handed to c.Error inside the
// execution, so that the error response Echo writes for it is the response
// that is recorded and judged by the keep policy (an *echo.HTTPError with
// 500 releases the key; one with 404 is stored). The middleware then
// returns nil. A panic in a later handler is handled by the core, not by
// Echo's Recover, because those handlers run in the Store's execution: the
// client gets 500 ProblemFailed, or a cut connection when the response had
// begun. Put Recover before the middleware: after it, Recover turns a panic
// into an ordinary response, and one that had begun is then kept as it was
// sent, truncated.
package idemecho
