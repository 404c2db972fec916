package fingerprint

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newRequest(t *testing.T, method, target, contentType, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func mustRequest(t *testing.T, b *Builder, r *http.Request) string {
	t.Helper()
	d, err := b.Request(r)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if len(d) != DigestLen || !strings.HasPrefix(d, Prefix) {
		t.Fatalf("digest %q is not %d characters with prefix %q", d, DigestLen, Prefix)
	}
	return d
}

// TestRequestSameAndDifferent compares pairs of requests: each pair must
// hash alike (same) or differently.
func TestRequestSameAndDifferent(t *testing.T) {
	const js = "application/json"
	const form = "application/x-www-form-urlencoded"
	type req struct{ method, target, ct, body string }
	tests := []struct {
		name string
		opts []Option
		a, b req
		same bool
	}{
		{"key order and whitespace", nil,
			req{"POST", "/orders", js, `{"a":1,"b":[1,2]}`}, req{"POST", "/orders", js, "{ \"b\" : [1, 2.0], \"a\":1e0 }"}, true},
		{"noisy fields", nil,
			req{"POST", "/orders", js, `{"a":1,"trace_id":"x","timestamp":1}`}, req{"POST", "/orders", js, `{"a":1,"trace_id":"y","timestamp":2}`}, true},
		{"content-type parameters", nil,
			req{"POST", "/orders", "application/json; charset=utf-8", `{"a":1}`}, req{"POST", "/orders", "Application/JSON", `{"a":1}`}, true},
		{"different value", nil,
			req{"POST", "/orders", js, `{"a":1}`}, req{"POST", "/orders", js, `{"a":2}`}, false},
		{"string vs number", nil,
			req{"POST", "/orders", js, `{"a":1}`}, req{"POST", "/orders", js, `{"a":"1"}`}, false},
		{"method", nil,
			req{"POST", "/orders", js, `{}`}, req{"PUT", "/orders", js, `{}`}, false},
		{"method off", []Option{WithMethod(false)},
			req{"POST", "/orders", js, `{}`}, req{"PUT", "/orders", js, `{}`}, true},
		{"path parameter", nil,
			req{"POST", "/orders/1/pay", js, `{}`}, req{"POST", "/orders/2/pay", js, `{}`}, false},
		{"escaped slash", nil,
			req{"POST", "/files/a%2Fb", "", ""}, req{"POST", "/files/a/b", "", ""}, false},
		{"route off", []Option{WithRoute(nil)},
			req{"POST", "/a", js, `{}`}, req{"POST", "/b", js, `{}`}, true},
		{"custom route", []Option{WithRoute(func(*http.Request) string { return "create-order" })},
			req{"POST", "/v1/orders", js, `{}`}, req{"POST", "/v2/orders", js, `{}`}, true},
		{"query order of names", nil,
			req{"POST", "/o?a=1&b=2", "", ""}, req{"POST", "/o?b=2&a=1", "", ""}, true},
		{"query order of repeated values", nil,
			req{"POST", "/o?a=1&a=2", "", ""}, req{"POST", "/o?a=2&a=1", "", ""}, false},
		{"query escapes", nil,
			req{"POST", "/o?q=a+b&r=%41", "", ""}, req{"POST", "/o?q=a%20b&r=A", "", ""}, true},
		{"query empty pieces", nil,
			req{"POST", "/o?a=1&&b=2&", "", ""}, req{"POST", "/o?a=1&b=2", "", ""}, true},
		{"query value", nil,
			req{"POST", "/o?a=1", "", ""}, req{"POST", "/o?a=2", "", ""}, false},
		{"query absent vs empty", nil,
			req{"POST", "/o", "", ""}, req{"POST", "/o?a=", "", ""}, false},
		{"query malformed escape vs literal", nil,
			req{"POST", "/o?a=%zz", "", ""}, req{"POST", "/o?a=%25zz", "", ""}, false},
		{"query malformed escapes differ", nil,
			req{"POST", "/o?a=%zz", "", ""}, req{"POST", "/o?a=%zy", "", ""}, false},
		{"query off", []Option{WithQuery(false)},
			req{"POST", "/o?a=1", "", ""}, req{"POST", "/o?a=2", "", ""}, true},
		{"query allow", []Option{WithQueryAllow("a")},
			req{"POST", "/o?a=1&_=123", "", ""}, req{"POST", "/o?a=1&_=456", "", ""}, true},
		{"query allow keeps selected", []Option{WithQueryAllow("a")},
			req{"POST", "/o?a=1", "", ""}, req{"POST", "/o?a=2", "", ""}, false},
		{"query deny", []Option{WithQueryDeny("_")},
			req{"POST", "/o?a=1&_=123", "", ""}, req{"POST", "/o?a=1&_=456", "", ""}, true},
		{"query and body", nil,
			req{"POST", "/o?a=1", js, `{}`}, req{"POST", "/o", js, `{}`}, false},
		{"form order", nil,
			req{"POST", "/f", form, "b=2&a=1"}, req{"POST", "/f", form, "a=1&b=2"}, true},
		{"form repeated order", nil,
			req{"POST", "/f", form, "a=1&a=2"}, req{"POST", "/f", form, "a=2&a=1"}, false},
		{"form deny list", nil,
			req{"POST", "/f", form, "a=1&nonce=x"}, req{"POST", "/f", form, "nonce=y&a=1"}, true},
		{"form allow list", []Option{WithAllow("amount")},
			req{"POST", "/f", form, "amount=1&note=x"}, req{"POST", "/f", form, "amount=1&note=y"}, true},
		{"form vs raw text", nil,
			req{"POST", "/f", form, "a=1"}, req{"POST", "/f", "text/plain", "a=1"}, false},
		{"raw bytes exact", nil,
			req{"POST", "/u", "text/plain", "hello"}, req{"POST", "/u", "text/plain", "hello "}, false},
		{"raw media type counts", nil,
			req{"POST", "/u", "text/plain", "hello"}, req{"POST", "/u", "text/csv", "hello"}, false},
		{"json media types differ", nil,
			req{"PATCH", "/o", "application/merge-patch+json", `{"a":1}`}, req{"PATCH", "/o", js, `{"a":1}`}, false},
		{"+json canonicalized", nil,
			req{"POST", "/o", "application/vnd.api+json", `{"b":1,"a":2}`}, req{"POST", "/o", "application/vnd.api+json", `{"a":2,"b":1}`}, true},
		{"json without content type is bytes", nil,
			req{"POST", "/o", "", `{"b":1,"a":2}`}, req{"POST", "/o", "", `{"a":2,"b":1}`}, false},
		{"empty body any type", nil,
			req{"POST", "/o", js, ""}, req{"POST", "/o", "text/plain", ""}, true},
		{"empty vs empty object", nil,
			req{"POST", "/o", js, ""}, req{"POST", "/o", js, "{}"}, false},
		{"framing: route vs query", nil,
			req{"POST", "/o?a=1", "", ""}, req{"POST", "/o%3Fa=1", "", ""}, false},
		{"framing: route vs body", []Option{WithMethod(false)},
			req{"POST", "/ab", "text/plain", "c"}, req{"POST", "/a", "text/plain", "bc"}, false},
		{"framing: query name vs value", nil,
			req{"POST", "/o?ab=c", "", ""}, req{"POST", "/o?a=bc", "", ""}, false},
		{"framing: method vs route", []Option{WithRoute(func(r *http.Request) string { return r.Header.Get("X-R") })},
			req{"POST", "/", "", ""}, req{"POS", "/", "", ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(t, tt.opts...)
			da := mustRequest(t, b, newRequest(t, tt.a.method, tt.a.target, tt.a.ct, tt.a.body))
			db := mustRequest(t, b, newRequest(t, tt.b.method, tt.b.target, tt.b.ct, tt.b.body))
			if (da == db) != tt.same {
				t.Errorf("same = %v, want %v (%s, %s)", da == db, tt.same, da, db)
			}
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	b := newBuilder(t, WithHeaders("x-tenant", "ACCEPT", "host", "X-Tenant"))
	base := func() *http.Request {
		r := newRequest(t, "POST", "http://api.example/o", "", "")
		r.Header.Add("X-Tenant", "t1")
		r.Header.Add("Accept", "a")
		r.Header.Add("Accept", "b")
		r.Header.Set("X-Other", "1")
		return r
	}
	d0 := mustRequest(t, b, base())
	tests := []struct {
		name   string
		change func(r *http.Request)
		same   bool
	}{
		{"unselected header", func(r *http.Request) { r.Header.Set("X-Other", "2") }, true},
		{"selected value", func(r *http.Request) { r.Header.Set("X-Tenant", "t2") }, false},
		{"value order", func(r *http.Request) { r.Header["Accept"] = []string{"b", "a"} }, false},
		{"values joined", func(r *http.Request) { r.Header["Accept"] = []string{"a, b"} }, false},
		{"absent", func(r *http.Request) { r.Header.Del("X-Tenant") }, false},
		{"host", func(r *http.Request) { r.Host = "other.example" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base()
			tt.change(r)
			if d := mustRequest(t, b, r); (d == d0) != tt.same {
				t.Errorf("same = %v, want %v", d == d0, tt.same)
			}
		})
	}
	// Headers do not count by default.
	r1, r2 := base(), base()
	r2.Header.Set("X-Tenant", "t2")
	if mustRequest(t, newBuilder(t), r1) != mustRequest(t, newBuilder(t), r2) {
		t.Error("a header counted without WithHeaders")
	}
	// An absent header and an empty one differ.
	r1.Header.Del("X-Tenant")
	r2.Header.Set("X-Tenant", "")
	if mustRequest(t, b, r1) == mustRequest(t, b, r2) {
		t.Error("absent and empty header hash alike")
	}
}

// TestRequestBodyStaysReadable checks that the handler sees the body as sent.
func TestRequestBodyStaysReadable(t *testing.T) {
	bodies := map[string]string{
		"json":  `{"b":1, "a":2}`,
		"empty": ``,
		"big":   strings.Repeat("x", 100000),
		"bad":   `{"a":`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			r := newRequest(t, "POST", "/o", "application/json", body)
			_, _ = newBuilder(t).Request(r) // the bad body fails; it stays readable all the same
			got, err := io.ReadAll(r.Body)
			if err != nil || string(got) != body {
				t.Errorf("handler read %d bytes (%v), want %d", len(got), err, len(body))
			}
			if err := r.Body.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestRequestTooLarge(t *testing.T) {
	body := strings.Repeat("a", 1000)
	r := newRequest(t, "POST", "/o", "text/plain", body)
	r.ContentLength = -1 // unknown length: the limit must still hold
	_, err := newBuilder(t, WithMaxBytes(100)).Request(r)
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("got %v, want ErrBodyTooLarge", err)
	}
	got, _ := io.ReadAll(r.Body)
	if string(got) != body {
		t.Errorf("after ErrBodyTooLarge the handler read %d bytes, want %d", len(got), len(body))
	}
	// A Content-Length over the limit is refused without reading.
	r = newRequest(t, "POST", "/o", "text/plain", body)
	if _, err := newBuilder(t, WithMaxBytes(100)).Request(r); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("Content-Length over the limit: got %v", err)
	}
	if got, _ := io.ReadAll(r.Body); string(got) != body {
		t.Errorf("after a refusal on Content-Length the handler read %d bytes, want %d", len(got), len(body))
	}
	if _, err := newBuilder(t, WithMaxBytes(100)).RequestBody(r, []byte(body)); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("RequestBody: got %v, want ErrBodyTooLarge", err)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), f.n)
	for i := range p[:n] {
		p[i] = 'a'
	}
	f.n -= n
	return n, nil
}

func TestRequestReadError(t *testing.T) {
	r := httptest.NewRequest("POST", "/o", io.NopCloser(&failingReader{n: 10}))
	_, err := newBuilder(t).Request(r)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want the read error", err)
	}
	got, err := io.ReadAll(r.Body)
	if string(got) != "aaaaaaaaaa" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("handler read %q, %v", got, err)
	}
}

// TestRequestBodyMatchesRequest checks that a middleware that has read the
// body gets the same fingerprint, and that Sum is the body part alone.
func TestRequestBodyMatchesRequest(t *testing.T) {
	body := `{"amount": 100, "currency": "EUR", "nonce": "n1"}`
	r := newRequest(t, "POST", "/o?x=1", "application/json", body)
	b := newBuilder(t, WithHeaders("X-Tenant"))
	d1 := mustRequest(t, b, r)
	read, _ := io.ReadAll(r.Body)
	d2, err := b.RequestBody(r, read)
	if err != nil || d1 != d2 {
		t.Errorf("Request %s, RequestBody %s (%v)", d1, d2, err)
	}

	only := newBuilder(t, WithMethod(false), WithRoute(nil), WithQuery(false))
	d3 := mustRequest(t, only, newRequest(t, "POST", "/o?x=1", "application/json", body))
	d4, err := only.Sum([]byte(body))
	if err != nil || d3 != d4 {
		t.Errorf("body-only Request %s, Sum %s (%v)", d3, d4, err)
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name, ct, body string
		want           error
	}{
		{"invalid json", "application/json", `{"a":}`, ErrInvalidJSON},
		{"duplicate", "application/problem+json", `{"a":1,"a":1}`, ErrDuplicateMember},
		{"range", "application/json", `1e999`, ErrNumberRange},
		{"surrogate", "application/json", `"\ud800"`, ErrInvalidString},
		{"deep", "application/json", strings.Repeat("[", 2000), ErrTooDeep},
		{"invalid json as text is fine", "text/plain", `{"a":}`, nil},
		{"gzip json is bytes", "application/json", "\x1f\x8b\x08", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest(t, "POST", "/o", tt.ct, tt.body)
			if strings.HasPrefix(tt.body, "\x1f") {
				r.Header.Set("Content-Encoding", "gzip")
			}
			_, err := newBuilder(t).Request(r)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRequestNilBody(t *testing.T) {
	r := newRequest(t, "POST", "/o", "", "")
	r.Body = nil
	d1 := mustRequest(t, newBuilder(t), r)
	r2 := newRequest(t, "POST", "/o", "", "")
	r2.Body = http.NoBody
	if d2 := mustRequest(t, newBuilder(t), r2); d1 != d2 {
		t.Error("nil and empty bodies differ")
	}
	r3 := &http.Request{Method: "POST", Header: http.Header{}}
	if _, err := newBuilder(t).RequestBody(r3, nil); err != nil {
		t.Errorf("request without URL: %v", err)
	}
}

// A header name WithHeaders cannot match is an error from New, never a
// header that silently never counts.
func TestHeadersMustBeNames(t *testing.T) {
	for _, name := range []string{"", "X Tenant", "X-Tenant:", "é"} {
		if _, err := New(WithHeaders("X-Ok", name)); err == nil || !strings.Contains(err.Error(), "WithHeaders") {
			t.Errorf("WithHeaders(%q): %v, want an error naming the option", name, err)
		}
	}
}
