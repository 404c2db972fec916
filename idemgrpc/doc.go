// Package idemgrpc puts idem in front of gRPC unary calls: a call that
// carries an idempotency key runs its handler once per key, across any
// number of servers that share a tiered.Store's Redis and SQL tiers, and
// every duplicate gets the stored response message again.
//
//	icpt, err := idemgrpc.UnaryServerInterceptor(store,
//		idemgrpc.WithScope(idemgrpc.ScopeFromContext(accountKey{})), // set by auth
//		idemgrpc.WithRequire(true))
//	if err != nil {
//		return err
//	}
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recovery, auth, icpt))
//
// # The key
//
// The client sends its key in the incoming metadata "idempotency-key"
// (WithKeyName names another). The rules are the HTTP middleware's, applied
// by middleware.ParseKeyHeader: one value, 1 to 255 bytes of printable
// ASCII, bare or as an RFC 8941 string ("abc" and abc are the same key),
// no comma in a bare key. A call without the key passes to the handler
// untouched, unless WithRequire(true). The key's scope is the full method
// name, followed by WithScope's answer (the authenticated principal): the
// same key on two methods, or from two principals, names two operations,
// and no caller reads another's stored answer. A scope is required:
// without WithScope or an explicit WithSingleTenant the interceptor is
// refused, and a call WithScope names no principal for fails with
// Unauthenticated before anything is claimed.
//
// # The fingerprint
//
// A key reused for a different request is refused, never replayed. Two
// calls are the same request when their full method names are equal and
// their request messages are: the message is written as protojson with
// proto field names and canonicalized by a fingerprint.Builder (RFC 8785),
// so field order, map order, packing and a default value sent or left out
// do not count, and neither do unknown fields. WithFingerprint takes the
// Builder's field lists, whose paths name proto fields as the .proto file
// does ("items[*].client_ts"); the default deny-list of noisy names
// (timestamp, nonce, trace_id, span_id, request_id, correlation_id …)
// applies unless fingerprint.WithDefaultDeny(false). Names always match
// exactly. Function Fingerprint computes the same digest.
//
// # What is stored
//
// The handler's response message (as a google.protobuf.Any: its type URL
// and its deterministic encoding), and, when WithReplayMetadata names
// them, the header and trailer metadata the handler set. A replay
// unmarshals the response through protoregistry.GlobalTypes, where
// generated code registers every message type, so a response type must be
// generated code linked into the server (dynamicpb messages cannot be
// replayed). Every replay, and every call that shared another call's
// execution, carries the response header "idempotent-replayed: true"
// (ReplayedHeader; WithReplayHeader(false) turns it off).
//
// The call whose handler ran is answered as every replay is: from the
// answer the Store kept, decoded by the same code, never from the value
// the handler returned. It gets the stored message or kept status and the
// stored metadata, so that the first answer and every retry's are one.
// The metadata WithReplayMetadata names reaches it only from there: what
// the handler set of it after its answer was stored (after Completion, for a
// handler that completes in its transaction) reaches no call. Metadata not
// named reaches no call either, the handler's own included: what no retry
// can get, the first caller does not get. Set such metadata in an
// interceptor outside this one, or name it.
//
// A handler error releases the key by default, so a retry runs the handler
// again: the HTTP middleware does the same for 5xx. WithKeep names the
// statuses kept as final answers instead (InvalidArgument, NotFound …):
// those are stored as a google.rpc.Status, code, message and details, and
// replayed as they were. Calls that shared the failed execution in this
// process get the handler's error as it returned it. A handler that
// returns neither a message nor an error (nil, nil) has no answer to
// store: the key is released and the call gets Internal.
//
// # Status codes
//
// The interceptor's own answers carry a google.rpc.ErrorInfo detail (domain
// ErrorDomain, a Reason constant), and the retryable ones a RetryInfo
// detail (WithRetryDelays; 1 s and 5 s by default), as gRPC clients and
// retry policies expect. The HTTP middleware's answer is given for
// comparison. One function makes the decision for every error the Store
// returns; an error that is several of these (a lease lost by a handler
// that then failed) gets the first row of: a panic, a configuration error,
// a lost lease, the handler's error, then the others.
//
//	situation                                        code                 reason                       HTTP
//	no key, key not required                         the handler's answer                              passed through
//	no key, WithRequire                              InvalidArgument      IDEMPOTENCY_KEY_MISSING      400
//	malformed key (empty, > 255 bytes, not           InvalidArgument      IDEMPOTENCY_KEY_MALFORMED    400
//	  printable ASCII, two values)
//	request message protojson cannot write           Internal             FAILED                       500
//	  (an Any of a type the server does not link)
//	request message past fingerprint.WithMaxBytes    ResourceExhausted    REQUEST_NOT_FINGERPRINTABLE  413
//	the handler ran, its answer is stored            the stored response (or kept status)              the stored response
//	same key, same request, completed                the stored response (or kept status), replayed    the stored response
//	the handler failed, the policy did not keep it   the handler's error (the key is released)         the handler's response
//	same key, same request, in flight past the wait  Aborted + RetryInfo  REQUEST_IN_FLIGHT            409
//	same key, different request                      FailedPrecondition   IDEMPOTENCY_KEY_REUSED       422
//	stores unable to decide (the handler did not     Unavailable +        STORE_UNAVAILABLE            503
//	  run), or the Store closing                       RetryInfo
//	the handler ran, its answer is not stored yet    Unavailable +        RESULT_PENDING               503
//	                                                   RetryInfo
//	the handler ran, another owner took the key      Aborted + RetryInfo  LEASE_LOST                   409
//	  over (this owner was cut off past its lease)
//	the answer was too large to store                FailedPrecondition   NOT_REPLAYABLE               409
//	  (the first call gets its own answer)
//	the handler panicked (the key is released)       Internal             FAILED                       500
//	the handler returned nil, nil (released)         Internal             FAILED                       500
//	the handler completed in a transaction that      Internal             FAILED                       500
//	  did not commit, and returned no error
//	  (released: a retry runs again)
//	the handler completed in its transaction but     Internal             FAILED                       500
//	  returned another answer (the completed one
//	  stands: a retry receives it)
//	configuration error (a missing table …)          Internal             FAILED                       500
//	the call's own context ended while it waited     Canceled or DeadlineExceeded                      —
//
// Aborted is gRPC's code for a conflict with a concurrent operation that
// the client retries at a higher level, and FailedPrecondition for a
// request the client must change before it can succeed; Unavailable is the
// code clients retry by themselves. A duplicate waits for an owner in
// flight up to the Store's Wait, and stops waiting when its own deadline
// passes.
//
// # The handler's context and panics
//
// The handler runs with the Store's work context: it keeps the call's
// values (incoming metadata, peer, authentication, tracing) but not its
// cancellation, so a client that gives up does not abort the work its
// retry will look for; it ends when the lease is lost (cause
// idem.ErrLeaseLost) or the Store closes. The response header and trailer
// the handler sets reach its own call while that call lasts, those that
// WithReplayMetadata names through the stored answer (see What is
// stored). With WithReplayMetadata, grpc.SendHeader does not send the
// header at once: it goes out with the answer, once the answer is stored.
//
// A handler that panics is recovered by the Store, which releases the key
// in every tier; the call, and every call that shared its execution,
// get Internal. The panic never reaches the server's goroutine, so a
// recovery interceptor outside this one sees an ordinary error, and the
// handler is not run again for the call: only a later retry runs it, as
// after any released failure. A recovery interceptor placed after this one
// turns the panic into an error first, which the keep policy then judges
// like any other. The status does not carry the panic's value:
// WithPanicHandler hears it, with its stack, to log it.
//
// # Completing in the handler's transaction
//
// The handler's context carries its reservation (idem.ReservationFrom): a
// handler that writes business rows completes the key in the same
// transaction, passing Completion's encoding of the response it will return to
// the SQL layer's CompleteReservation. What committed then decides every
// retry, even when the server dies before its Store could complete the key.
//
// What committed decides the handler's own call too. A handler that,
// after its completion committed, returns another message (one whose
// encoding differs from what it completed), an error, or nil, or that
// panics, gets Internal (reason FAILED) for its call: no call is ever
// given an answer no retry can get. The completed answer stands, and a
// retry receives it. Metadata the handler sets after Completion is not part
// of its answer. A transaction that did not commit leaves nothing: the key
// is released, the call gets the handler's error (Internal when it
// returned none), and a retry runs the handler again.
//
// # Streams
//
// Only unary calls are guarded: a stream's messages are not one request
// and one answer to store.
package idemgrpc
