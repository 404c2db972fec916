// Package client is the client half of idem: an http.RoundTripper that gives
// each logical operation one idempotency key and retries it, with that same
// key, until the operation is answered or a retry cannot help.
//
// The rule it keeps: one key per business operation, minted once and sent
// unchanged on every retry. A client that makes a new key on each retry
// defeats any server, because each attempt is then a new operation.
//
//	t, err := client.New(http.DefaultTransport, client.WithRetention(24*time.Hour))
//	if err != nil { … }
//	c := &http.Client{Transport: t}
//	req, _ := http.NewRequestWithContext(client.ContextWithKey(ctx, "order-1042"), "POST", url, body)
//	resp, err := c.Do(req) // retried with Idempotency-Key: order-1042
//
// What a Transport does with one request:
//
//   - Key. A request of a guarded method (POST and PATCH by default, see
//     WithMethods) gets one key: the caller's (ContextWithKey, or an
//     Idempotency-Key header already on the request; an order ID makes the
//     best key), or one minted from 130 random bits. A retry never changes
//     it. Other methods are sent as they are, and retried only when they
//     are idempotent by definition (GET, HEAD, OPTIONS, TRACE, PUT, DELETE)
//     or carry a key.
//   - Body. Every attempt sends the same bytes: through Request.GetBody when
//     set (http.NewRequest sets it for bytes and strings readers), else the
//     body is read once into memory, up to WithBodyLimit; a larger one is
//     refused before anything is sent (ErrBodyTooLarge).
//   - Retries. What may not have been answered is retried: an error of the
//     connection before or after the request was written, an attempt over
//     its timeout (WithAttemptTimeout), 409 while the first request is in
//     flight, 408, 425, 429, 502, 503 and 504. Retry-After is honoured; else
//     the wait is exponential with full jitter (WithBackoff). Attempts are
//     bounded (WithAttempts), and so is the whole operation
//     (WithDeadline), which must stay below the server's retention
//     (WithRetention), or a late retry would run the operation again.
//   - No retries for what a retry cannot fix: 400, 401, 403, 404, 413, 422
//     (the key reused with another payload) and every other status, and
//     any answer whose Idempotency-Should-Retry or Stripe-Should-Retry
//     header says "false".
//
// The Transport returns the last answer as an *http.Response, as every
// RoundTripper must. Check turns one of idem's problems (application/
// problem+json, or the Stripe-shaped body of middleware.WriteStripeError)
// into a *Problem, which wraps idem.ErrInFlight, idem.ErrMismatch,
// idem.ErrUnavailable or ErrNotReplayable; Outcome tells the key, the
// number of attempts and whether the answer was a replay.
//
// A Transport is safe for concurrent use, starts no goroutine of its own
// (the timers of attempt timeouts aside, which end with their attempt) and
// closes every body it does not return. Each wait ends with the request's
// context.
package client
