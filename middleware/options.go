package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"time"

	"github.com/idemkit/idem/fingerprint"
)

// Defaults of a Handler.
const (
	// DefaultKeyHeader is the header that carries the client key.
	DefaultKeyHeader = "Idempotency-Key"
	// DefaultBodyLimit is the largest request body read (1 MiB); a larger
	// one is answered 413 before any claim.
	DefaultBodyLimit = 1 << 20
	// DefaultResponseLimit is the largest response body stored (1 MiB); a
	// larger one is sent in full but stored as a tombstone.
	DefaultResponseLimit = 1 << 20
	// DefaultRetryAfterInFlight is the Retry-After of ProblemInFlight.
	DefaultRetryAfterInFlight = time.Second
	// DefaultRetryAfterUnavailable is the Retry-After of ProblemUnavailable.
	DefaultRetryAfterUnavailable = 5 * time.Second
)

// DefaultMethods returns the methods guarded unless WithMethods says
// otherwise: POST and PATCH. The slice is a copy.
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultKeep is the default keep policy: a response is stored when its
// status is 2xx, 3xx or 4xx, except 408 Request Timeout, 425 Too Early and
// 429 Too Many Requests, which say "try again". Everything else (5xx) is not
// stored: the key is released and a retry runs the handler again.
func DefaultKeep(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// Option configures a Handler. Options apply in order over the defaults;
// an option given nonsense makes NewHandler (and New, and the adapters)
// fail, with an error that says, under the option's name, what to give
// instead.
type Option func(*config) error

type config struct {
	keyHeader     string
	require       bool
	derive        bool
	methods       []string
	scope         func(*http.Request) string
	scoped        bool // WithScope or WithSingleTenant was given
	fp            *fingerprint.Builder
	fpOpts        []fingerprint.Option // WithFingerprint's, for fingerprint.New
	bodyLimit     int64
	responseLimit int
	keep          func(status int) bool
	replay        []string // canonical names, storable only
	marker        string   // canonical name, "" when off
	errWriter     ErrorWriter
	statuses      Statuses
	retryAfter    [2]string // in flight, unavailable: whole seconds
	answers       AnswerObserver
	shouldRetry   string // canonical name, "" when off (retry.go)
}

func defaults() config {
	return config{
		keyHeader:     DefaultKeyHeader,
		methods:       DefaultMethods(),
		bodyLimit:     DefaultBodyLimit,
		responseLimit: DefaultResponseLimit,
		keep:          DefaultKeep,
		replay:        replayNames(DefaultReplayHeaders()),
		errWriter:     WriteProblem,
		shouldRetry:   DefaultShouldRetryHeader,
		statuses:      DefaultStatuses(),
		retryAfter: [2]string{
			seconds(DefaultRetryAfterInFlight),
			seconds(DefaultRetryAfterUnavailable),
		},
	}
}

// WithKeyHeader sets the header that carries the client key. Default
// DefaultKeyHeader ("Idempotency-Key"). An empty or invalid header name is
// an error.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if !validToken(name) {
			return fmt.Errorf("WithKeyHeader: give a header name (got %q)", name)
		}
		c.keyHeader = textproto.CanonicalMIMEHeaderKey(name)
		return nil
	}
}

// WithRequire makes the key mandatory on guarded methods: a request without
// one is answered 400 (ProblemKeyMissing). Default off: such a request
// passes through untouched. WithDerivedKey takes precedence.
func WithRequire(on bool) Option { return func(c *config) error { c.require = on; return nil } }

// WithDerivedKey makes the server derive a key from the fingerprint when the
// client sent none, so that identical requests (same method, route, query
// and meaningful body, within the scope) are executed once per retention
// period. Default off. Use it only where two identical requests can never
// be meant as two operations; a derived key never equals a client key.
func WithDerivedKey(on bool) Option { return func(c *config) error { c.derive = on; return nil } }

// WithMethods sets the guarded methods, compared exactly. Default
// DefaultMethods (POST, PATCH). Requests with other methods pass through
// untouched, key or not. No methods means none is guarded; a name that is
// not an HTTP method token ("" included) is an error.
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		for _, m := range methods {
			if !validToken(m) {
				return fmt.Errorf("WithMethods: give method names (got %q)", m)
			}
		}
		c.methods = append([]string(nil), methods...)
		return nil
	}
}

// WithScope sets the function that names the principal of a request (the
// tenant, account or user who sent it), which becomes part of the key: the
// same client key from two principals names two operations, and neither
// ever reads the other's stored response. A scope is required: New,
// NewHandler and the adapters refuse a configuration with neither
// WithScope nor WithSingleTenant. nil is an error.
//
// scope runs for each guarded request that carries a key (or gets a
// derived one), after the earlier middleware, so it can read what
// authentication put in the request's context ([ScopeFromContext]); Gin
// and Echo adapters offer the same for their own context's values. An
// empty answer means the request names no principal: it is refused with
// ProblemScopeMissing (401 by default) and nothing is claimed. Name the
// principal by what stays the same across a retry — a user or account id
// — never by a credential that rotates (a bearer token, a session cookie,
// a client certificate's serial): a retry after a token refresh is the
// same operation and must replay. WithScope and WithSingleTenant set one
// setting: the last given wins.
func WithScope(scope func(r *http.Request) string) Option {
	return func(c *config) error {
		if scope == nil {
			return errors.New("WithScope: give a function that names the request's principal, or WithSingleTenant() for a service with one (got nil)")
		}
		c.scope, c.scoped = scope, true
		return nil
	}
}

// WithSingleTenant says, explicitly, that the service has one principal:
// every caller shares one scope, and a stored response reaches any caller
// that sends its key and request. Use it only where that is true (an
// internal service called by one client, a single-user tool); a service
// with several tenants or users gives WithScope instead. It replaces a
// WithScope given before it.
func WithSingleTenant() Option {
	return func(c *config) error { c.scope, c.scoped = nil, true; return nil }
}

// WithFingerprint sets what "the same request" means, with the options of
// package fingerprint over its defaults: method, escaped URL path, query and
// the body (canonical JSON without the default noisy fields), as
// fingerprint.New() gives. Calls add up, and so does idemgrpc's option of
// the same name, which takes the same options. Options fingerprint.New
// refuses make NewHandler fail. For example, an API that takes nothing but
// JSON, some of whose clients send it as text/plain:
//
//	middleware.WithFingerprint(fingerprint.WithJSONBodies(true), fingerprint.WithDeny("items[*].client_ts"))
func WithFingerprint(opts ...fingerprint.Option) Option {
	return func(c *config) error {
		c.fpOpts = append(c.fpOpts, opts...)
		return nil
	}
}

// WithBodyLimit sets the largest request body read, in bytes. Default
// DefaultBodyLimit (1 MiB). A larger body (by Content-Length, or once read)
// is answered 413 before any claim, so nothing is stored. The whole body is
// held in memory while the request runs. 0 means no limit of the
// middleware's own: the fingerprint Builder's WithMaxBytes (16 MiB by
// default, also answered 413) then bounds it, and a body of up to that size
// is held in memory per request. A negative n is an error.
func WithBodyLimit(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithBodyLimit: give 0 (no limit of the middleware's own) or more bytes (got %d)", n)
		}
		c.bodyLimit = n
		return nil
	}
}

// WithResponseLimit sets the largest response body stored, in bytes.
// Default DefaultResponseLimit (1 MiB). A larger response is sent in full
// but stored as a tombstone (ProblemNotReplayable). Keep it below what the
// store's layers accept: a response they refuse is not replayable either.
// 0 means no limit of the middleware's own: every response is held in
// memory until the Store has decided, whatever its size, and the layers'
// limits decide what is kept. A negative n is an error.
func WithResponseLimit(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithResponseLimit: give 0 (no limit of the middleware's own) or more bytes (got %d)", n)
		}
		c.responseLimit = n
		return nil
	}
}

// WithKeep sets the policy that decides by status whether a response is
// stored (true) or the key released so that a retry runs the handler again
// (false). Default DefaultKeep. A panic always releases; a hijacked
// connection is always kept. nil is an error (leave the option out for the
// default).
func WithKeep(keep func(status int) bool) Option {
	return func(c *config) error {
		if keep == nil {
			return errors.New("WithKeep: give a policy, or leave the option out for DefaultKeep (got nil)")
		}
		c.keep = keep
		return nil
	}
}

// WithReplayHeaders replaces the response headers that are stored and
// replayed. Default DefaultReplayHeaders. No names means none is replayed.
// Set-Cookie, Authorization, WWW-Authenticate, Proxy-Authenticate,
// Content-Length and the hop-by-hop headers are never stored, even when
// named; a name that is not a header name is an error.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) error {
		for _, n := range names {
			if !validToken(n) {
				return fmt.Errorf("WithReplayHeaders: give header names (got %q)", n)
			}
		}
		c.replay = replayNames(names)
		return nil
	}
}

// WithReplayMarker makes replays carry the header name with the value
// "true", so that clients can tell a replay from a first execution. Default
// off: the draft standard leaves replays unmarked. "" turns it off; a name
// that is not a header name is an error.
func WithReplayMarker(name string) Option {
	return func(c *config) error {
		switch {
		case name == "":
			c.marker = ""
		case !validToken(name):
			return fmt.Errorf("WithReplayMarker: give a header name, or \"\" for none (got %q)", name)
		default:
			c.marker = textproto.CanonicalMIMEHeaderKey(name)
		}
		return nil
	}
}

// WithErrorWriter sets how problems are written. Default WriteProblem
// (RFC 9457 application/problem+json). nil is an error (leave the option
// out for the default).
func WithErrorWriter(w ErrorWriter) Option {
	return func(c *config) error {
		if w == nil {
			return errors.New("WithErrorWriter: give a writer, or leave the option out for WriteProblem (got nil)")
		}
		c.errWriter = w
		return nil
	}
}

// WithStatuses sets the status codes of the middleware's own answers. A zero
// field keeps its default (DefaultStatuses): the one setting where zero
// means "the default", as usual for a struct of settings in Go, so that a
// caller names only the codes it changes. A field outside 200–599 is an
// error.
func WithStatuses(s Statuses) Option {
	return func(c *config) error {
		if err := s.validate(); err != nil {
			return err
		}
		c.statuses = s.merge(c.statuses)
		return nil
	}
}

// WithRetryAfter sets the Retry-After of ProblemInFlight and of
// ProblemUnavailable, rounded up to whole seconds. Defaults
// DefaultRetryAfterInFlight (1 s) and DefaultRetryAfterUnavailable (5 s).
// Neither can be zero: 0 or a negative duration is an error. How long a
// duplicate waits for the request in flight before ProblemInFlight is the
// Store's setting (tiered.WithWait, default 10 s).
func WithRetryAfter(inFlight, unavailable time.Duration) Option {
	return func(c *config) error {
		if inFlight <= 0 || unavailable <= 0 {
			return fmt.Errorf("WithRetryAfter: give two positive durations (got %v, %v)", inFlight, unavailable)
		}
		c.retryAfter = [2]string{seconds(inFlight), seconds(unavailable)}
		return nil
	}
}

func seconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}
