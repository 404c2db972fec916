package fingerprint

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// DefaultMaxBytes is the default body size limit of a Builder: 16 MiB. The
// HTTP middleware usually refuses large bodies first; this limit keeps a
// direct caller of Sum or Request from hashing arbitrarily large input.
const DefaultMaxBytes = 16 << 20

// DefaultDeny is the deny-list a Builder applies unless WithDefaultDeny(false)
// is given: member names that carry per-attempt noise rather than meaning,
// dropped at any depth. A field that may carry business meaning (id,
// created_at, date, version, ts, event_id …) is deliberately absent: a
// deny-list that is too broad merges two real orders. The slice is a copy;
// changing it changes nothing.
func DefaultDeny() []string {
	return []string{
		"**.timestamp",
		"**.nonce",
		"**.trace_id", "**.traceId",
		"**.span_id", "**.spanId",
		"**.request_id", "**.requestId",
		"**.correlation_id", "**.correlationId",
		"**.traceparent", "**.tracestate",
	}
}

// Option configures a Builder. Options apply in order after the defaults;
// those that take lists add to what earlier calls gave. An option given
// nonsense makes New fail, with an error that says, under the option's
// name, what to give instead.
type Option func(*config) error

type config struct {
	allow, deny   []string
	defaultDeny   bool
	method        bool
	route         func(*http.Request) string
	query         bool
	queryAllow    []string
	queryAllowSet bool
	queryDeny     []string
	headers       []string
	maxBytes      int64
	maxDepth      int
	caseSensitive bool
	jsonBodies    bool
}

func defaults() config {
	return config{
		defaultDeny: true,
		method:      true,
		route:       DefaultRoute,
		query:       true,
		maxBytes:    DefaultMaxBytes,
		maxDepth:    DefaultMaxDepth,
	}
}

// WithAllow makes only the body fields at these paths count (path syntax
// and matching rules in the package documentation). Default: no allow-list,
// every field counts except those denied. Deny paths still apply inside an
// allowed field. A name in an allow path also matches the member names
// encoding/json would read into the same struct field ("amount" reaches
// "Amount" and "AMOUNT"), unless WithCaseSensitiveNames(true). Calls add
// up; a call with no paths changes nothing. A malformed path is an error
// wrapping ErrInvalidPath.
func WithAllow(paths ...string) Option {
	return func(c *config) error {
		if err := checkPaths("WithAllow", paths); err != nil {
			return err
		}
		c.allow = append(c.allow, paths...)
		return nil
	}
}

// WithDeny makes the body fields at these paths never count, in addition to
// the default deny-list (unless WithDefaultDeny(false)). Default: only the
// default deny-list. Calls add up.
func WithDeny(paths ...string) Option {
	return func(c *config) error {
		if err := checkPaths("WithDeny", paths); err != nil {
			return err
		}
		c.deny = append(c.deny, paths...)
		return nil
	}
}

// checkPaths returns an error wrapping ErrInvalidPath for each malformed
// path, naming the option.
func checkPaths(option string, paths []string) error {
	var errs []error
	for _, p := range paths {
		if _, err := parsePath(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: give a valid field path (see the package documentation): %w", option, err))
		}
	}
	return errors.Join(errs...)
}

// WithDefaultDeny turns the default deny-list (DefaultDeny) on or off.
// Default: on. Paths given to WithDeny apply either way.
func WithDefaultDeny(on bool) Option {
	return func(c *config) error { c.defaultDeny = on; return nil }
}

// WithMethod makes the request method count or not in Request and
// RequestBody. Default: it counts (an empty method counts as GET, as in
// net/http).
func WithMethod(on bool) Option {
	return func(c *config) error { c.method = on; return nil }
}

// WithRoute sets the function that names the route of a request in Request
// and RequestBody. Default: DefaultRoute, the escaped URL path. nil makes
// the route not count at all. The function is called once
// per request, from any goroutine; it must not keep r.
func WithRoute(route func(r *http.Request) string) Option {
	return func(c *config) error { c.route = route; return nil }
}

// WithQuery makes the query string count or not in Request and RequestBody.
// Default: every query parameter counts.
func WithQuery(on bool) Option {
	return func(c *config) error { c.query = on; return nil }
}

// WithQueryAllow makes only the query parameters with these names
// (case-sensitive, compared after unescaping) count. Default: all count.
// Calls add up; a call with no names changes nothing.
func WithQueryAllow(names ...string) Option {
	return func(c *config) error {
		if len(names) > 0 {
			c.queryAllow = append(c.queryAllow, names...)
			c.queryAllowSet = true
		}
		return nil
	}
}

// WithQueryDeny makes the query parameters with these names
// (case-sensitive) never count. Default: none is denied; the body's
// deny-list does not apply to the query. Calls add up.
func WithQueryDeny(names ...string) Option {
	return func(c *config) error { c.queryDeny = append(c.queryDeny, names...); return nil }
}

// WithHeaders makes the request headers with these names count
// (case-insensitive; "Host" means the request's Host). Default: no header
// counts. Each named header counts with all its values in the order
// received; an absent header and a header with an empty value differ.
// Calls add up. A name that is not a header name ("" included) is an
// error.
func WithHeaders(names ...string) Option {
	return func(c *config) error {
		for _, n := range names {
			if !headerName(n) {
				return fmt.Errorf("WithHeaders: give header names (got %q)", n)
			}
		}
		c.headers = append(c.headers, names...)
		return nil
	}
}

// headerName reports whether s is an HTTP field name (an RFC 9110 token).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// WithMaxBytes sets the largest body, in bytes, that Sum, Request,
// RequestBody and Builder.Canonicalize accept; a longer one fails with
// ErrBodyTooLarge before any scanning. Default: DefaultMaxBytes (16 MiB).
// 0 means no limit of the caller's: the package's own hard cap,
// HardMaxBytes (1 GiB), still applies, and so does an n above it. A
// negative n is an error.
func WithMaxBytes(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithMaxBytes: give 0 (no limit but HardMaxBytes) or more (got %d)", n)
		}
		if n == 0 || n > HardMaxBytes {
			n = HardMaxBytes
		}
		c.maxBytes = n
		return nil
	}
}

// WithMaxDepth sets how many objects and arrays may be open at once in a
// JSON body; deeper input fails with ErrTooDeep. Default: DefaultMaxDepth
// (1000). 0 means no limit of the caller's: the package's own cap,
// MaxDepthLimit (10,000), still applies, and so does an n above it. A
// negative n is an error.
func WithMaxDepth(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("WithMaxDepth: give 0 (no limit but MaxDepthLimit) or more (got %d)", n)
		}
		if n == 0 || n > MaxDepthLimit {
			n = MaxDepthLimit
		}
		c.maxDepth = n
		return nil
	}
}

// WithCaseSensitiveNames, when on, tells a Builder that the server matches
// JSON member names exactly, as a map[string]T or encoding/json/v2 without
// MatchCaseInsensitiveNames does: names that differ only in case are then
// different fields, a body may hold both, and allow paths match names
// exactly. Default: off, for servers that decode with encoding/json into
// structs, which matches names case-insensitively and lets the last match
// win; a Builder then refuses an object with two names equal under
// Unicode simple case folding (ErrAmbiguousMember), and a name in an allow
// path also matches the names equal to it under that folding. Deny paths
// match exactly either way.
//
// The risk of turning it on behind a handler that does decode into
// structs: {"amount":100,"AMOUNT":5} and {"AMOUNT":5,"amount":100} get one
// fingerprint, the handler reads 5 from one and 100 from the other, and
// the second is answered with the first one's response; and with
// WithAllow("amount"), {"Amount":5} and {"Amount":500} share a
// fingerprint, since "Amount" does not count.
func WithCaseSensitiveNames(on bool) Option {
	return func(c *config) error { c.caseSensitive = on; return nil }
}

// WithJSONBodies reads every body as JSON, whatever its Content-Type, when
// on: a client that sends JSON as text/plain, or with curl -d (which says
// application/x-www-form-urlencoded), or with no Content-Type at all, gets
// the canonical JSON fingerprint, with the deny-list applied, so that a
// retry with a new timestamp is the same request. Such a body is hashed as
// application/json is, so the same JSON sent with and without the right
// type has one fingerprint. A body that is not JSON is then an error
// (ErrInvalidJSON: a 400 behind the middleware), and a body with a
// Content-Encoding other than identity still counts as its bytes. Default
// off: only application/json and +json types are read as JSON, forms as
// forms, and anything else counts as its bytes and media type. Turn it on
// for an API that takes nothing but JSON.
func WithJSONBodies(on bool) Option {
	return func(c *config) error { c.jsonBodies = on; return nil }
}

// DefaultRoute is the route function of a Builder unless WithRoute replaces
// it: the escaped URL path (RawPath when it is a valid encoding of Path), so
// that /a%2Fb and /a/b stay different. It is not r.Pattern: a pattern such
// as "POST /orders/{id}" is the same for /orders/1 and /orders/2, which
// would merge two orders, and it is empty outside a ServeMux's dispatch, so
// it would change with where the middleware is mounted.
func DefaultRoute(r *http.Request) string {
	if r.URL == nil {
		return ""
	}
	return r.URL.EscapedPath()
}
