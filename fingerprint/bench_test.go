package fingerprint

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchSizes are the body sizes every benchmark sweeps: a small payment, a
// typical order, a large order and a bulk import.
var benchSizes = []struct {
	name string
	n    int
}{
	{"size=200B", 200},
	{"size=1KiB", 1 << 10},
	{"size=16KiB", 16 << 10},
	{"size=256KiB", 256 << 10},
}

// orderJSON returns a payments/orders shaped JSON body of about n bytes,
// pretty-printed the way clients often send it: nested objects, an array of
// line items, strings with escapes and non-ASCII text, integers and
// decimals, and some noise fields the default deny-list drops.
func orderJSON(n int) []byte {
	if n < 300 {
		return []byte(`{"amount": 1999, "currency": "EUR", "customer": "cus_42", "capture": true, "fee": 0.35,
  "description": "Order \"A-17\" caf\u00e9", "payment_method": {"type": "card", "last4": "4242"}, "trace_id": "4bf92f35"}`)
	}
	var b strings.Builder
	b.WriteString(`{"amount": 1999, "currency": "EUR", "customer": "cus_42", "trace_id": "4bf92f35", "description": "Order \"A\"",
  "shipping": {"name": "Zoë Müller", "line1": "Hauptstraße 5", "city": "Köln", "postal_code": "50667", "country": "DE"},
  "metadata": {"channel": "web", "campaign": "spring\/24", "timestamp": "2024-05-01T10:00:00Z"},
  "items": [`)
	for i := 0; b.Len() < n-40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `
    {"sku": "SKU-%05d", "qty": %d, "unit_price": %d.%02d, "discount": 0.1, "taxable": %t, "note": "line %d\tgift wrap \u263a", "attrs": {"color": "blue", "size": "M"}}`,
			i, i%5+1, 3+i%97, i%100, i%2 == 0, i)
	}
	b.WriteString("\n  ]\n}")
	return []byte(b.String())
}

// varying returns a copy of body whose trace_id (a field the default
// deny-list drops) next rewrites on each call, so that every iteration
// hashes bytes the Builder has not seen: what a new request costs, with no
// help from the memo of recent inputs.
func varying(tb testing.TB, body []byte) (b []byte, next func()) {
	b = []byte(string(body))
	at := strings.Index(string(b), `"4bf92f35"`) + 1
	if at == 0 {
		tb.Fatal("benchmark body without its trace_id")
	}
	var n uint32
	const hex = "0123456789abcdef"
	return b, func() {
		n++
		for i := range 8 {
			b[at+i] = hex[n>>(28-4*i)&15]
		}
	}
}

// BenchmarkSum measures Builder.Sum with the default configuration (default
// deny-list on) on a body it has not seen: scanning, validating, filtering,
// canonicalizing and hashing it. Compare with BenchmarkSumReference,
// sub-benchmark by sub-benchmark (benchstat -col .name).
func BenchmarkSum(b *testing.B) {
	for _, size := range benchSizes {
		body, next := varying(b, orderJSON(size.n))
		fb := newBuilder(b)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				next()
				if _, err := fb.Sum(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSumRepeat measures Sum on the same body every time, as a
// redelivered message is: the memo of recent inputs answers after one
// SHA-256 of the raw bytes.
func BenchmarkSumRepeat(b *testing.B) {
	for _, size := range benchSizes {
		body := orderJSON(size.n)
		fb := newBuilder(b)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fb.Sum(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSumReference measures the obvious way to hash JSON canonically
// with the standard library, on the same bodies: encoding/json decodes into
// any, re-encodes (sorted keys, compact) and SHA-256 hashes the result. It
// validates less (duplicate names pass) and filters nothing, so it is a
// lower bound of that approach's cost.
func BenchmarkSumReference(b *testing.B) {
	for _, size := range benchSizes {
		body := orderJSON(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					b.Fatal(err)
				}
				out, err := json.Marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				_ = sha256.Sum256(out)
			}
		})
	}
}

// BenchmarkCanonicalize measures Canonicalize alone: no field lists, no
// hashing, and a fresh result slice per call.
func BenchmarkCanonicalize(b *testing.B) {
	for _, size := range benchSizes {
		body := orderJSON(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonicalize(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRequestBody measures what the HTTP middleware pays per request:
// method, route, a query string and a JSON body it has already read, with
// path=new a body it has not seen (a first execution) and path=retry the
// same bytes again (a client's retry, answered by the memo).
func BenchmarkRequestBody(b *testing.B) {
	for _, size := range benchSizes {
		for _, path := range []string{"new", "retry"} {
			body, next := varying(b, orderJSON(size.n))
			if path == "retry" {
				next = func() {}
			}
			r := httptest.NewRequest("POST", "/v1/orders?expand=items&notify=email", nil)
			r.Header.Set("Content-Type", "application/json")
			fb := newBuilder(b)
			b.Run(size.name+"/path="+path, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					next()
					if _, err := fb.RequestBody(r, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestBenchBodies keeps the benchmark bodies honest: valid, near their
// nominal size, and the same to both implementations.
func TestBenchBodies(t *testing.T) {
	for _, size := range benchSizes {
		body := orderJSON(size.n)
		if !json.Valid(body) {
			t.Errorf("%s: invalid JSON", size.name)
		}
		if len(body) < size.n*8/10 || len(body) > size.n*12/10 {
			t.Errorf("%s: %d bytes", size.name, len(body))
		}
		if _, err := Canonicalize(body); err != nil {
			t.Errorf("%s: %v", size.name, err)
		}
	}
}
