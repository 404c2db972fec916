package middleware

import (
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

// Option configures a Handler. Options apply in order over the defaults.
type Option func(*config)

type config struct {
	keyHeader  string
	require    bool
	derive     bool
	methods    []string
	scope      func(*http.Request) string
	fp         *fingerprint.Builder
	bodyLimit  int64
	respLimit  int
	keep       func(status int) bool
	replay     []string // canonical names, storable only
	marker     string   // canonical name, "" when off
	errWriter  ErrorWriter
	statuses   Statuses
	retryAfter [2]string // in flight, unavailable: whole seconds
}

func defaults() config {
	return config{
		keyHeader: DefaultKeyHeader,
		methods:   DefaultMethods(),
		bodyLimit: DefaultBodyLimit,
		respLimit: DefaultResponseLimit,
		keep:      DefaultKeep,
		replay:    replayNames(DefaultReplayHeaders()),
		errWriter: WriteProblem,
		statuses:  DefaultStatuses(),
		retryAfter: [2]string{
			seconds(DefaultRetryAfterInFlight),
			seconds(DefaultRetryAfterUnavailable),
		},
	}
}

// WithKeyHeader sets the header that carries the client key. Default
// DefaultKeyHeader ("Idempotency-Key"). An empty or invalid name keeps the
// default.
func WithKeyHeader(name string) Option {
	return func(c *config) {
		if validToken(name) {
			c.keyHeader = textproto.CanonicalMIMEHeaderKey(name)
		}
	}
}

// WithRequire makes the key mandatory on guarded methods: a request without
// one is answered 400 (ProblemKeyMissing). Default off: such a request
// passes through untouched. WithDerivedKey takes precedence.
func WithRequire(on bool) Option { return func(c *config) { c.require = on } }

// WithDerivedKey makes the server derive a key from the fingerprint when the
// client sent none, so that identical requests (same method, route, query
// and meaningful body, within the scope) are executed once per retention
// period. Default off. Use it only where two identical requests can never
// be meant as two operations; a derived key never equals a client key.
func WithDerivedKey(on bool) Option { return func(c *config) { c.derive = on } }

// WithMethods sets the guarded methods, compared exactly. Default
// DefaultMethods (POST, PATCH). Requests with other methods pass through
// untouched, key or not. No methods means none is guarded.
func WithMethods(methods ...string) Option {
	return func(c *config) { c.methods = append([]string(nil), methods...) }
}

// WithScope sets the function that names the scope of a request (tenant,
// account, user), which becomes part of the key: the same client key in two
// scopes names two operations. Default none: one scope for everybody. It
// runs after the earlier middleware, so it can read what authentication
// put in the request's context.
func WithScope(scope func(r *http.Request) string) Option {
	return func(c *config) { c.scope = scope }
}

// WithFingerprint sets the Builder that decides what "the same request"
// means. Default fingerprint.New(): method, escaped URL path, query and the
// body (canonical JSON without the default noisy fields). A nil Builder
// keeps the default.
func WithFingerprint(b *fingerprint.Builder) Option {
	return func(c *config) {
		if b != nil {
			c.fp = b
		}
	}
}

// WithBodyLimit sets the largest request body read, in bytes. Default
// DefaultBodyLimit (1 MiB). A larger body (by Content-Length, or once read)
// is answered 413 before any claim, so nothing is stored. n <= 0 keeps the
// default. The whole body is held in memory while the request runs.
func WithBodyLimit(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.bodyLimit = n
		}
	}
}

// WithResponseLimit sets the largest response body stored, in bytes.
// Default DefaultResponseLimit (1 MiB). A larger response is sent in full
// but stored as a tombstone (ProblemNotReplayable). Keep it below what the
// store's layers accept. n <= 0 keeps the default.
func WithResponseLimit(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.respLimit = n
		}
	}
}

// WithKeep sets the policy that decides by status whether a response is
// stored (true) or the key released so that a retry runs the handler again
// (false). Default DefaultKeep. A panic always releases; a hijacked
// connection is always kept. nil keeps the default.
func WithKeep(keep func(status int) bool) Option {
	return func(c *config) {
		if keep != nil {
			c.keep = keep
		}
	}
}

// WithReplayHeaders replaces the response headers that are stored and
// replayed. Default DefaultReplayHeaders. Set-Cookie, Authorization,
// WWW-Authenticate, Proxy-Authenticate, Content-Length and the hop-by-hop
// headers are never stored, even when named; invalid names are ignored.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) { c.replay = replayNames(names) }
}

// WithReplayMarker makes replays carry the header name with the value
// "true", so that clients can tell a replay from a first execution. Default
// off: the draft standard leaves replays unmarked. "" turns it off.
func WithReplayMarker(name string) Option {
	return func(c *config) {
		c.marker = ""
		if validToken(name) {
			c.marker = textproto.CanonicalMIMEHeaderKey(name)
		}
	}
}

// WithErrorWriter sets how problems are written. Default WriteProblem
// (RFC 9457 application/problem+json). nil keeps the default.
func WithErrorWriter(w ErrorWriter) Option {
	return func(c *config) {
		if w != nil {
			c.errWriter = w
		}
	}
}

// WithStatuses sets the status codes of the middleware's own answers. A zero
// field keeps its default (DefaultStatuses).
func WithStatuses(s Statuses) Option {
	return func(c *config) { c.statuses = s.merge(c.statuses) }
}

// WithRetryAfter sets the Retry-After of ProblemInFlight and of
// ProblemUnavailable, rounded up to whole seconds (at least 1). Defaults
// DefaultRetryAfterInFlight (1 s) and DefaultRetryAfterUnavailable (5 s).
// How long a duplicate waits for the request in flight before
// ProblemInFlight is the Store's setting (tiered.WithWait, default 10 s).
func WithRetryAfter(inFlight, unavailable time.Duration) Option {
	return func(c *config) { c.retryAfter = [2]string{seconds(inFlight), seconds(unavailable)} }
}

func seconds(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(s), 1), 10)
}
