package fingerprint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Request returns the fingerprint of r: its method, route, query parameters,
// selected headers and body, as configured (see New). It reads the body and
// puts back in r.Body a reader over the same bytes, so that the handler
// reads exactly what the client sent; closing it closes the original body.
//
// How the body counts depends on its Content-Type: application/json and any
// +json type are canonicalized (RFC 8785 with exact integers) and filtered
// by the allow- and deny-lists; application/x-www-form-urlencoded is canonicalized with its
// fields sorted and the lists applied to its names; anything else, and any
// body with a Content-Encoding other than identity, counts as its bytes
// together with its media type — unless WithJSONBodies, which reads every
// identity-encoded body as application/json. An empty body has its own
// fingerprint, whatever its type.
//
// A body over the size limit fails with ErrBodyTooLarge, and r.Body then still
// yields the whole body. A JSON body that is not I-JSON fails with the
// errors listed for Sum. A failed read of the body is returned as it is,
// wrapped.
func (b *Builder) Request(r *http.Request) (string, error) {
	body, err := readBody(r, b.maxBytes)
	if err != nil {
		return "", err
	}
	return b.RequestBody(r, body)
}

// RequestBody is Request for a caller that has read the body already, such
// as a middleware that must buffer it anyway: body is used in place of
// r.Body, which is not touched. It gives the same fingerprint as Request
// for the same request and body.
func (b *Builder) RequestBody(r *http.Request, body []byte) (string, error) {
	if err := b.check(body); err != nil {
		return "", err
	}
	w := getWork()
	defer putWork(w)
	w.out = append(w.out, domain...)
	var at int
	if b.method {
		m := r.Method
		if m == "" {
			m = http.MethodGet
		}
		w.out, at = begin(w.out, tagMethod)
		w.out = append(w.out, m...)
		end(w.out, at)
	}
	if b.route != nil {
		w.out, at = begin(w.out, tagRoute)
		w.out = append(w.out, b.route(r)...)
		end(w.out, at)
	}
	if b.query {
		w.out, at = begin(w.out, tagQuery)
		var raw string
		if r.URL != nil {
			raw = r.URL.RawQuery
		}
		w.queryPairs(b, raw)
		end(w.out, at)
	}
	if len(b.headers) > 0 {
		w.out, at = begin(w.out, tagHeader)
		w.headerPart(b, r)
		end(w.out, at)
	}
	kind, mt, enc := byte(bodyEmpty), "", ""
	if len(body) > 0 {
		mt, enc = mediaType(r.Header)
		kind = bodyKind(mt, enc)
		if b.jsonBodies && enc == "" && kind != bodyJSON {
			kind, mt = bodyJSON, "application/json" // hashed as if sent as JSON
		}
	}
	var k [32]byte
	var m *memo
	if kind == bodyJSON || kind == bodyForm { // the kinds worth remembering
		if m = b.memoFor(); m != nil && m.seenBefore(w, w.out, kind, mt, enc, body) {
			k = w.memoKey(w.out, kind, mt, enc, body)
			if fp, ok := m.get(&k); ok {
				return fp, nil
			}
		} else {
			m = nil // a first sighting: nothing to look up or remember
		}
	}
	if err := w.bodyPart(b, kind, mt, enc, body); err != nil {
		return "", err
	}
	fp := digest(w.out)
	if m != nil {
		m.put(&k, fp)
	}
	return fp, nil
}

func (w *work) headerPart(b *Builder, r *http.Request) {
	w.out = appendCount(w.out, len(b.headers))
	for _, name := range b.headers {
		w.out = appendStr(w.out, 0, name)
		vals := r.Header[name]
		if name == "Host" && r.Host != "" {
			vals = []string{r.Host}
		}
		w.out = appendCount(w.out, len(vals))
		for _, v := range vals {
			w.out = appendStr(w.out, 0, v)
		}
	}
}

// bodyKind returns how a non-empty body of media type mt and encoding enc
// counts: as canonical JSON, as a canonical form, or as its bytes.
func bodyKind(mt, enc string) byte {
	switch {
	case enc == "" && (mt == "application/json" || strings.HasSuffix(mt, "+json")):
		return bodyJSON
	case enc == "" && mt == "application/x-www-form-urlencoded":
		return bodyForm
	}
	return bodyBytes
}

// bodyPart appends the part of a body of the given kind.
func (w *work) bodyPart(b *Builder, kind byte, mt, enc string, body []byte) error {
	switch kind {
	case bodyEmpty:
		return w.jsonBody(b, "", nil)
	case bodyJSON:
		return w.jsonBody(b, mt, body)
	case bodyForm:
		out, at := begin(w.out, tagBody)
		w.out = append(out, bodyForm)
		w.formPairs(b, body)
		end(w.out, at)
	default:
		out, at := begin(w.out, tagBody)
		out = append(out, bodyBytes)
		out = appendStr(out, 0, mt)
		out = appendStr(out, 0, enc)
		w.out = appendStr(out, 0, body)
		end(w.out, at)
	}
	return nil
}

// mediaType returns the lower-case media type of a Content-Type header
// without its parameters, and the Content-Encoding, "" for identity.
func mediaType(h http.Header) (mt, enc string) {
	mt, _, _ = strings.Cut(h.Get("Content-Type"), ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	for _, e := range h.Values("Content-Encoding") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e != "" && e != "identity" {
			enc = strings.ToLower(strings.Join(h.Values("Content-Encoding"), ","))
			break
		}
	}
	return mt, enc
}

// readCloser reads the buffered body and closes the original one.
type readCloser struct {
	io.Reader
	io.Closer
}

// readBody reads r.Body up to limit bytes and puts back a reader over what
// it read, followed by whatever it did not read.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		// Refused on the client's own word, before a byte is read.
		return nil, fmt.Errorf("%w: Content-Length %d, limit %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	orig := r.Body
	// Content-Length is the client's word: trust it for the first
	// allocation only up to a modest size, and grow from there.
	size := int64(512)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, limit, 1<<20) + 1
	}
	buf := make([]byte, 0, size)
	var err error
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n := min(int64(cap(buf)), limit+1)
		var m int
		m, err = orig.Read(buf[len(buf):n])
		buf = buf[:len(buf)+m]
		if err != nil {
			break
		}
	}
	switch {
	case int64(len(buf)) > limit:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), orig), orig}
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	case err != nil && !errors.Is(err, io.EOF):
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), orig), orig}
		return nil, fmt.Errorf("fingerprint: reading the body: %w", err)
	}
	r.Body = readCloser{bytes.NewReader(buf), orig}
	return buf, nil
}
