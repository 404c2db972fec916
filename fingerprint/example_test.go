package fingerprint_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
)

func ExampleCanonicalize() {
	out, err := fingerprint.Canonicalize([]byte(`{"b": [1.50, 1E3, -0], "a": "\u00e9\n"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output: {"a":"é\n","b":[1.5,1000,0]}
}

func ExampleCanonicalize_errors() {
	for _, in := range []string{`{"a":1,"a":2}`, `[1e400]`, `"\ud800"`, `{"a":}`} {
		_, err := fingerprint.Canonicalize([]byte(in))
		fmt.Println(errors.Is(err, fingerprint.ErrDuplicateMember), errors.Is(err, fingerprint.ErrNumberRange),
			errors.Is(err, fingerprint.ErrInvalidString), errors.Is(err, fingerprint.ErrInvalidJSON))
	}
	// Output:
	// true false false false
	// false true false false
	// false false true false
	// false false false true
}

// The default deny-list drops noise such as trace IDs and timestamps, so a
// retry that refreshed them is still the same request.
func ExampleNew() {
	b, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	first, _ := b.Sum([]byte(`{"amount": 100, "trace_id": "a1", "timestamp": "2024-05-01T10:00:00Z"}`))
	retry, _ := b.Sum([]byte(`{"timestamp": "2024-05-01T10:00:03Z", "amount": 100, "trace_id": "b2"}`))
	other, _ := b.Sum([]byte(`{"amount": 200, "trace_id": "a1"}`))
	fmt.Println(first == retry, first == other, len(first) == fingerprint.DigestLen)
	fmt.Println(first)
	// Output:
	// true false true
	// f1:2d5071770f165e873e34da460375c6c67e5c0058c612cfa820ad0292301471d9
}

// A malformed path is an error from New, so that a typo never silently
// widens what counts.
func ExampleNew_invalidPath() {
	_, err := fingerprint.New(fingerprint.WithDeny("items[0].sku"))
	fmt.Println(errors.Is(err, fingerprint.ErrInvalidPath), errors.Is(err, idem.ErrConfig))
	fmt.Println(err)
	// Output:
	// true true
	// idem: configuration error: fingerprint: WithDeny: give a valid field path (see the package documentation): fingerprint: invalid field path "items[0].sku": only "[*]" may follow a name
}

// WithDeny adds paths that never count, here a client clock inside every
// item and a field of one nested object.
func ExampleWithDeny() {
	b, err := fingerprint.New(fingerprint.WithDeny("items[*].client_ts", "metadata.sent_at"))
	if err != nil {
		log.Fatal(err)
	}
	out, _ := b.Canonicalize([]byte(`{
		"items": [{"sku": "A-1", "client_ts": 1700000000}, {"sku": "B-7", "client_ts": 1700000004}],
		"metadata": {"sent_at": "10:00", "channel": "web", "trace_id": "x"}
	}`))
	fmt.Println(string(out))
	// Output: {"items":[{"sku":"A-1"},{"sku":"B-7"}],"metadata":{"channel":"web"}}
}

// WithAllow makes only the named fields count; the containers on the way
// are kept, and every array keeps its length.
func ExampleWithAllow() {
	b, err := fingerprint.New(fingerprint.WithAllow("amount", "currency", "items[*].sku"))
	if err != nil {
		log.Fatal(err)
	}
	out, _ := b.Canonicalize([]byte(`{
		"amount": 100, "currency": "EUR", "note": "gift",
		"items": [{"sku": "A-1", "qty": 2}, {"qty": 1}]
	}`))
	fmt.Println(string(out))
	// Output: {"amount":100,"currency":"EUR","items":[{"sku":"A-1"},null]}
}

// WithDefaultDeny(false) turns the default deny-list off, for bodies where
// a "timestamp" or "nonce" is business data.
func ExampleWithDefaultDeny() {
	withDefault, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	without, err := fingerprint.New(fingerprint.WithDefaultDeny(false))
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"reading": 21.5, "timestamp": 1700000000}`)
	on, _ := withDefault.Canonicalize(body)
	off, _ := without.Canonicalize(body)
	fmt.Println(string(on))
	fmt.Println(string(off))
	// Output:
	// {"reading":21.5}
	// {"reading":21.5,"timestamp":1700000000}
}

// Request hashes method, path, query and body, and leaves the body for the
// handler to read.
func ExampleBuilder_Request() {
	b, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/orders?notify=email", strings.NewReader(`{"amount": 100, "nonce": "x1"}`))
	r.Header.Set("Content-Type", "application/json")
	d, err := b.Request(r)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Println(d)
	fmt.Println(string(body))
	// Output:
	// f1:e2c0ec13a12a81c2ed63177c60660fe6ce8277cae6591147499d72e80d8711e3
	// {"amount": 100, "nonce": "x1"}
}

// WithQueryDeny drops parameters that are noise, such as a cache buster.
func ExampleWithQueryDeny() {
	b, err := fingerprint.New(fingerprint.WithQueryDeny("_"))
	if err != nil {
		log.Fatal(err)
	}
	sum := func(target string) string {
		d, _ := b.Request(httptest.NewRequest(http.MethodPost, target, nil))
		return d
	}
	base := sum("/export?format=csv&_=1")
	fmt.Println(base == sum("/export?_=2&format=csv"))
	fmt.Println(base == sum("/export?format=json&_=1"))
	// Output:
	// true
	// false
}

// WithQueryAllow makes only the named parameters count.
func ExampleWithQueryAllow() {
	b, err := fingerprint.New(fingerprint.WithQueryAllow("format"))
	if err != nil {
		log.Fatal(err)
	}
	x, _ := b.Request(httptest.NewRequest(http.MethodPost, "/export?format=csv&utm_source=mail", nil))
	y, _ := b.Request(httptest.NewRequest(http.MethodPost, "/export?utm_source=ad&format=csv", nil))
	fmt.Println(x == y)
	// Output: true
}

// WithHeaders makes headers count; none do by default. Names are
// case-insensitive.
func ExampleWithHeaders() {
	b, err := fingerprint.New(fingerprint.WithHeaders("x-tenant"))
	if err != nil {
		log.Fatal(err)
	}
	sum := func(tenant string) string {
		r := httptest.NewRequest(http.MethodPost, "/orders", nil)
		r.Header.Set("X-Tenant", tenant)
		d, _ := b.Request(r)
		return d
	}
	acme, again, globex := sum("acme"), sum("acme"), sum("globex")
	fmt.Println(acme == again, acme == globex)
	// Output: true false
}

// RequestBody serves a middleware that has buffered the body already.
func ExampleBuilder_RequestBody() {
	b, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"amount": 100}`)
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	r.Header.Set("Content-Type", "application/json")
	d1, _ := b.RequestBody(r, body)

	r2 := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"amount": 100}`))
	r2.Header.Set("Content-Type", "application/json")
	d2, _ := b.Request(r2)
	fmt.Println(d1 == d2)
	// Output: true
}

// WithRoute replaces the default route (the escaped path). Here a route
// name stands for several versions of one endpoint.
func ExampleWithRoute() {
	b, err := fingerprint.New(fingerprint.WithRoute(func(r *http.Request) string {
		return strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1"), "/v2")
	}))
	if err != nil {
		log.Fatal(err)
	}
	v1, _ := b.Request(httptest.NewRequest(http.MethodPost, "/v1/orders", nil))
	v2, _ := b.Request(httptest.NewRequest(http.MethodPost, "/v2/orders", nil))
	fmt.Println(v1 == v2)
	// Output: true
}

// WithMaxBytes and WithMaxDepth bound the work one body may cause.
func ExampleWithMaxBytes() {
	b, err := fingerprint.New(fingerprint.WithMaxBytes(16), fingerprint.WithMaxDepth(2))
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.Sum([]byte(`{"note": "longer than sixteen bytes"}`))
	fmt.Println(errors.Is(err, fingerprint.ErrBodyTooLarge))
	_, err = b.Sum([]byte(`[[[1]]]`))
	fmt.Println(errors.Is(err, fingerprint.ErrTooDeep))
	// Output:
	// true
	// true
}

// A Go handler that decodes into a struct reads {"amount":100,"AMOUNT":5}
// as 5 and the same members in the other order as 100, so a Builder
// refuses such a body. WithCaseSensitiveNames(true) accepts it, for a
// server that matches member names exactly.
func ExampleWithCaseSensitiveNames() {
	goStructs, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	exactNames, err := fingerprint.New(fingerprint.WithCaseSensitiveNames(true))
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"amount": 100, "AMOUNT": 5}`)
	_, err = goStructs.Sum(body)
	fmt.Println(errors.Is(err, fingerprint.ErrAmbiguousMember))
	fmt.Println(err)
	_, err = exactNames.Sum(body)
	fmt.Println(err)
	// Output:
	// true
	// fingerprint: ambiguous member names: "AMOUNT" and "amount" differ only in case
	// <nil>
}

// Builder.Canonicalize shows what a Builder hashes: RFC 8785, except that
// an integer keeps its digits, as encoding/json reads it into an int64.
func ExampleBuilder_Canonicalize() {
	b, err := fingerprint.New()
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"id": 9007199254740993, "fee": 1.50, "qty": 1E3}`)
	rfc, _ := fingerprint.Canonicalize(body)
	exact, _ := b.Canonicalize(body)
	fmt.Println(string(rfc))
	fmt.Println(string(exact))
	// Output:
	// {"fee":1.5,"id":9007199254740992,"qty":1000}
	// {"fee":1.5,"id":9007199254740993,"qty":1000}
}
