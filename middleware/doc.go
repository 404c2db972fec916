// Package middleware makes retried HTTP requests execute once: a request
// that carries an Idempotency-Key runs its handler once per key, and every
// retry with that key gets the first response again, byte for byte — across
// any number of instances that share a [tiered.Store].
//
// [New] is net/http middleware and works with chi as it is:
//
//	store, err := tiered.New(tiered.WithRedis(redisLayer), tiered.WithSQL(sqlLayer))
//	if err != nil {
//		return err
//	}
//	// The caller's account, which authentication put in the context.
//	mw, err := middleware.New(store, middleware.WithScope(middleware.ScopeFromContext(accountKey{})))
//	if err != nil {
//		return err
//	}
//	r := chi.NewRouter()
//	r.Use(authenticate, mw)
//
// Packages idemgin and idemecho adapt the same core ([Handler]) to Gin and
// Echo; every decision is made here.
//
// # Behaviour
//
// Only guarded methods (POST and PATCH unless [WithMethods]) are touched;
// any other request passes through untouched. For a guarded request:
//
//	situation                                     answer (status configurable: WithStatuses)
//	no key, key not required                      passed through, untouched (body not read)
//	no key, WithRequire                           400 ProblemKeyMissing
//	no key, WithDerivedKey                        the key is derived from the fingerprint
//	a key, the scope names no principal           401 ProblemScopeMissing, nothing claimed
//	malformed key (see ParseKeyHeader)            400 ProblemKeyMalformed
//	body over WithBodyLimit (default 1 MiB)       413 ProblemBodyTooLarge, before any claim
//	body the fingerprint rejects (broken JSON)    400 ProblemBodyInvalid, nothing stored
//	first request with this key                   the handler runs; its response is held
//	                                              until stored, then sent from the record
//	same key and fingerprint, completed           the stored status, headers and body
//	same key and fingerprint, in flight           waits (the Store's Wait, default 10 s),
//	                                              then the owner's response; else
//	                                              409 ProblemInFlight + Retry-After
//	same key, different fingerprint               422 ProblemMismatch (another body, route
//	                                              or method: never the other's response)
//	store unable to decide                        503 ProblemUnavailable + Retry-After;
//	                                              the handler does not run
//	stored tombstone (see below)                  409 ProblemNotReplayable
//
// The key is scoped by [WithScope] (the tenant, account or user who sent
// the request): the same client key in two scopes names two operations,
// and neither ever sees the other's response. A scope is required: a
// configuration with neither WithScope nor an explicit [WithSingleTenant]
// is refused, and a keyed request whose scope names no principal is
// answered 401 ProblemScopeMissing before anything is claimed. How long a duplicate waits for the request in flight is the
// Store's setting ([tiered.WithWait]); the middleware has no wait of its own.
//
// # Keys
//
// The key header holds one key of 1 to 255 printable ASCII bytes
// (0x20–0x7E), bare (abc) or as an RFC 8941 string ("abc", with \" and \\
// escapes); both forms of one key are the same key. Two header lines, an
// empty or longer key, other bytes, a comma in a bare key (two joined header
// lines look like that), a broken string or anything after its closing
// quote are malformed. [ParseKeyHeader] implements this grammar.
//
// # Execution
//
// The handler runs inside the Store's execution, so that its singleflight,
// leases and renewal apply. It writes to a writer that holds the response
// until the Store has decided: the status, the allow-listed headers as they
// are when the status is written, and the body. Once the deciding tier has
// stored it (or the handler's transaction committed it), the leader's
// client is answered from that record, through the same code as every
// replay: every copy gets the same answer, byte for byte. A header changed
// after the status was written (through a header map taken before
// WriteHeader, or after a completion froze the response) and a header
// outside the allow-list (Set-Cookie, a custom header) reach no caller; set
// those before the middleware, or allow-list them with WithReplayHeaders
// (Set-Cookie and the other never-stored headers cannot be). The leader's
// headers therefore arrive when the handler has returned and the result is
// stored, not while it runs. A response that cannot be held — flushed,
// hijacked, past the response limit — goes to the leader live (Flush,
// Hijack and [http.ResponseController] work) and is stored as a tombstone.
//
// The handler's request carries the Store's work context: it keeps the
// request's values but not its cancellation (the work outlives a client
// that gave up, so that its retry finds the result) and ends when the lease
// is lost (cause [idem.ErrLeaseLost]) or the Store closes. Its body is the
// bytes the middleware read.
//
// # How a handler can end
//
// Package idemtest publishes the table of every way a handler can end
// (idemtest.Endings), with what the first caller gets, what is stored and
// what a retry gets; the kit checks each row on any stack. In short: a
// response the keep policy keeps is stored and replayed; a handler that
// returns without writing anything has decided nothing — the key is
// released, the client gets a 500 ProblemFailed and the retry runs again
// (WriteHeader(http.StatusOK) answers an empty 200 on purpose); a failure
// status, a panic or runtime.Goexit release the key. A handler that takes
// its reservation ([idem.ReservationFrom]) answers only through a
// completion in its transaction (sqllayer's CompleteReservation): if it
// returns without a completion that committed — its transaction failed
// before completing, rolled back, its COMMIT failed, or it never completed
// — it has committed nothing, whatever it wrote: the key is released, the
// client gets a 500 ProblemFailed, and the retry runs. Write the response,
// complete, commit; on any error, return.
//
// # What is stored
//
// A response is stored when the keep policy ([WithKeep], default
// [DefaultKeep]) keeps its status: 2xx, 3xx and 4xx except 408, 425 and 429.
// Otherwise (5xx, 408, 425, 429) the key is released so that a retry runs
// the handler again; requests that shared that execution get the same
// response. A panic releases the key too: the leader answers 500
// ProblemFailed, or, if its response had begun (or the handler panicked
// with [http.ErrAbortHandler]), the middleware cuts the connection itself
// — it hijacks and closes it over HTTP/1.x and resets the stream over
// HTTP/2 — and panics with http.ErrAbortHandler. The client then reads an
// error, never a broken response ended as if it were whole, even when
// recovery middleware swallows the panic. The panic value and stack
// reach the Store's Observer (EventReleased) and a custom [ErrorWriter]
// (Problem.Err); the process never dies of it.
//
// What is stored: the status, the headers of the replay allow-list
// ([DefaultReplayHeaders]: Content-Type, Content-Language, Content-Encoding,
// Content-Disposition, Location, ETag, Last-Modified, Link) and the body,
// in a small versioned binary form. Set-Cookie, Authorization,
// WWW-Authenticate, Proxy-Authenticate and the hop-by-hop headers
// (Connection, Keep-Alive, Transfer-Encoding, TE, Trailer, Upgrade,
// Proxy-Connection) are never stored, even when allow-listed, and a header
// value with CR, LF or NUL is dropped. Trailers are not stored. A replay
// sets Content-Length from the stored body and, with [WithReplayMarker],
// a marker header; it is otherwise not marked.
//
// # Tombstones
//
// A response that was streamed (the handler flushed), whose connection was
// hijacked, or whose body passed the response limit ([WithResponseLimit],
// default 1 MiB) reaches its client in full but cannot be repeated in full.
// It is stored as a tombstone: the key is completed, so a retry never runs
// the handler again, and a retry never gets half a body either. It gets 409
// ProblemNotReplayable, whose original_status member holds the status the
// response had. 409 and not a 5xx: the request did succeed (or fail)
// exactly once, nothing is wrong with the server, and clients retry 5xx
// answers automatically, which could never help here. Unlike ProblemInFlight
// it has no Retry-After. A streamed response whose status the policy does
// not keep is released like any other.
//
// A streamed response leaves before its tombstone is stored. An owner
// stopped (paused, cut off) past its lease and grace between its first
// flush and its completion loses the key to another instance, which runs
// the handler again: the first caller keeps what it was streamed, and
// retries get the second run's response. Behind a Store in the atomic mode
// a flush sends nothing before the commit, and this cannot happen.
package middleware
