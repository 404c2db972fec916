package fingerprint

import (
	"bytes"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"sync/atomic"

	"github.com/idemkit/idem/internal/option"
)

// jsonType is the media type Sum assumes.
const jsonType = "application/json"

// Builder computes fingerprints with one configuration. It is immutable
// after New and safe for concurrent use by any number of goroutines.
type Builder struct {
	filter     *filter
	method     bool
	route      func(*http.Request) string
	query      bool
	queryAllow map[string]bool // nil: every parameter may count
	queryDeny  map[string]bool
	headers    []string // canonical names, sorted, without repeats
	maxBytes   int64
	maxDepth   int
	mode       mode                 // how JSON is read where Go and RFC 8785 differ
	jsonBodies bool                 // every identity-encoded body is JSON (WithJSONBodies)
	memo       atomic.Pointer[memo] // digests of recent inputs, see memo.go
	calls      atomic.Uint32        // calls before the memo exists
}

// New returns a Builder configured by opts over the defaults: the default
// deny-list on, no allow-list, method, route (DefaultRoute) and all query
// parameters counting, no header counting, DefaultMaxBytes and
// DefaultMaxDepth. Options given nonsense make it fail with one error that
// names each of them and wraps idem.ErrConfig; a malformed field path also
// wraps ErrInvalidPath.
func New(opts ...Option) (*Builder, error) {
	c := defaults()
	if err := option.Refuse("fingerprint", option.Apply(&c, opts)...); err != nil {
		return nil, err
	}
	b := &Builder{
		method:   c.method,
		route:    c.route,
		query:    c.query,
		maxBytes: c.maxBytes,
		maxDepth: c.maxDepth,
		mode:     exactInts | foldNames,

		jsonBodies: c.jsonBodies,
	}
	if c.caseSensitive {
		b.mode = exactInts
	}
	var deny []string
	if c.defaultDeny {
		deny = DefaultDeny()
	}
	deny = append(deny, c.deny...)
	var err error
	if b.filter, err = compileFilter(c.allow, deny, !c.caseSensitive); err != nil {
		return nil, option.Refuse("fingerprint", err)
	}
	if c.queryAllowSet {
		b.queryAllow = set(c.queryAllow)
	}
	b.queryDeny = set(c.queryDeny)
	for _, h := range c.headers {
		b.headers = append(b.headers, textproto.CanonicalMIMEHeaderKey(h))
	}
	slices.Sort(b.headers)
	b.headers = slices.Compact(b.headers)
	return b, nil
}

func set(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Sum returns the fingerprint of body treated as JSON: its canonical form
// (RFC 8785 with exact integers, see the package documentation) after the
// Builder's allow- and deny-lists, hashed. Request
// parts (method, route, query, headers) do not count: Sum is for queue
// messages and other bodies without a request. An empty body has its own
// fingerprint; a body of only whitespace is invalid JSON.
//
// The result is DigestLen bytes long and starts with Prefix. Bad input
// returns an error wrapping ErrInvalidJSON, ErrDuplicateMember,
// ErrAmbiguousMember (unless WithCaseSensitiveNames(true)),
// ErrNumberRange, ErrInvalidString, ErrTooDeep or ErrBodyTooLarge, and never
// panics. Sum(body) equals Request for a request whose method, route and
// query are switched off and whose body is that JSON, sent as
// application/json.
func (b *Builder) Sum(body []byte) (string, error) {
	if err := b.check(body); err != nil {
		return "", err
	}
	w := getWork()
	defer putWork(w)
	var k [32]byte
	var m *memo
	if len(body) > 0 {
		if m = b.memoFor(); m != nil && m.seenBefore(w, nil, bodyJSON, jsonType, "", body) {
			k = w.memoKey(nil, bodyJSON, jsonType, "", body)
			if fp, ok := m.get(&k); ok {
				return fp, nil
			}
		} else {
			m = nil // a first sighting: nothing to look up or remember
		}
	}
	w.out = append(w.out, domain...)
	if err := w.jsonBody(b, jsonType, body); err != nil {
		return "", err
	}
	fp := digest(w.out)
	if m != nil {
		m.put(&k, fp)
	}
	return fp, nil
}

// Canonicalize returns the canonical form that Sum hashes for a JSON body:
// RFC 8785 with exact integers, after the Builder's allow- and deny-lists.
// It differs from the package's Canonicalize in the digits of integers
// beyond 2^53 and in refusing names that differ only in case. It is meant
// for debugging a fingerprint that differs unexpectedly. Errors are those
// of Sum; an empty body is invalid JSON here.
func (b *Builder) Canonicalize(body []byte) ([]byte, error) {
	if err := b.check(body); err != nil {
		return nil, err
	}
	w := getWork()
	defer putWork(w)
	if err := w.canonical(body, b.maxDepth, b.filter, b.mode); err != nil {
		return nil, err
	}
	return bytes.Clone(w.out), nil
}

func (b *Builder) check(body []byte) error {
	if int64(len(body)) > b.maxBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(body), b.maxBytes)
	}
	return nil
}

// jsonBody appends the body part of a JSON body of media type mt.
func (w *work) jsonBody(b *Builder, mt string, body []byte) error {
	out, at := begin(w.out, tagBody)
	if len(body) == 0 {
		w.out = append(out, bodyEmpty)
		end(w.out, at)
		return nil
	}
	out = append(out, bodyJSON)
	w.out = appendStr(out, 0, mt)
	if err := w.canonical(body, b.maxDepth, b.filter, b.mode); err != nil {
		return err
	}
	end(w.out, at)
	return nil
}
