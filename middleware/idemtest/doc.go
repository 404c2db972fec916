// Package idemtest is the conformance kit of package middleware: it runs
// idem's HTTP behaviour table against your own stack — your Store's tiers,
// your framework, your way of mounting the middleware — as package
// storetest does for layers. Call [Run] from a test with a [Stack] that
// says how your service mounts the middleware:
//
//	func TestIdempotency(t *testing.T) {
//		idemtest.Run(t, idemtest.Stack{
//			Tiers: idemtest.Memory(t),
//			Mount: func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
//				mw, err := middleware.New(store, opts...)
//				if err != nil {
//					return nil, err
//				}
//				r := chi.NewRouter()
//				r.Use(chimw.Recoverer, mw)
//				r.Handle("/*", h)
//				return r, nil
//			},
//		})
//	}
//
// The kit owns the handler behind the middleware (it counts its runs, so
// that it can tell an execution from a replay) and the requests; the stack
// owns everything between the client and that handler. Each row starts its
// own instances — real HTTP servers, each with a Store of its own over the
// tiers [Tiers] opens — and checks the promises of package middleware: the first
// request executes and later copies replay byte for byte (status, allowed
// headers, body, replay marker); a concurrent burst spread over three
// instances executes once and every copy gets the same answer; a reused key
// with another request is 422; a duplicate of work in flight waits for it,
// then gets 409 with Retry-After; a missing or malformed key is 400, a body
// over the limit 413, broken JSON 400, all before any claim; a 5xx, a 408,
// 425 or 429 and a panic release the key so that the retry runs again; a
// streamed, hijacked or oversized response becomes a not-replayable
// tombstone (409); requests without a key, and methods that are not
// guarded, pass through untouched; tenants never share a key; a dead
// deciding tier is 503, a dead Redis tier changes nothing but speed. The
// chain rows check that nothing after the middleware runs unless the
// middleware handed the request on, and the cut rows that a response the
// handler abandoned by panicking never reaches its client as complete,
// whatever recovery middleware the stack has, over HTTP/1.1 and HTTP/2.
//
// Faults are injected by wrapping the layers Tiers returns, so the kit needs
// no service of its own: [Memory] gives in-process layers, and a test that
// passes layers over a real Redis and database checks the stack as it runs
// in production. Every row uses keys of its own, so several packages may
// run the kit against one shared server at once.
package idemtest
