package fingerprint

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// paymentSizes are the body sizes BenchmarkCanonical sweeps: a typical
// payment or order, and a large order.
var paymentSizes = []struct {
	name string
	n    int
}{
	{"size=1KiB", 1 << 10},
	{"size=16KiB", 16 << 10},
}

// paymentJSON returns a payment/order JSON body of about n bytes, the same
// for the same n, written compactly with its members in a client's order
// (not sorted) as JSON encoders send it: nested objects, an array of line
// items, strings with escapes (\" \n \t \/ \u00e9) and raw non-ASCII text,
// integers, decimals, numbers with exponents and negative numbers, and a
// trace_id the default deny-list drops (varying rewrites it).
func paymentJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"pay_3NfL0x2eZvKYlo2C","object":"payment_intent","trace_id":"4bf92f35","amount":129900,"amount_received":0,` +
		`"currency":"eur","capture_method":"automatic","livemode":false,"fx_rate":1.0856e0,"risk_score":3.2E-5,` +
		`"customer":{"name":"Zoë Müller-Łukasiewicz","email":"zoe@example.com","phone":"+49 221 1234567",` +
		`"address":{"line1":"Hauptstraße 5","line2":null,"city":"Köln","postal_code":"50667","country":"DE"}},` +
		`"description":"Order \"A-17\" — caf\u00e9 \/ bistro\nsecond line","statement_descriptor":"ACME* 東京店",` +
		`"metadata":{"channel":"web","campaign":"spring\/24","timestamp":"2024-05-01T10:00:00Z","cart_weight_kg":12.5},` +
		`"items":[`)
	for i := 0; b.Len() < n-60; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%05d","name":"Item %d \u2013 %s","quantity":%d,"unit_amount":%d.%02d,"tax_rate":0.19,`+
			`"discount":{"kind":"percent","value":%de-2},"weight_g":%d.5E1,"gift":%t,"note":"line %d\tgift wrap ☺"}`,
			i, i, [...]string{"Tasse", "Teller", "Besteck", "Glas"}[i%4], i%5+1, 3+i%97, i%100, i%30, 10+i%40, i%2 == 0, i)
	}
	b.WriteString(`],"total_adjustment":-12.75,"shipping_rate_id":"shr_1Nf"}`)
	return []byte(b.String())
}

// BenchmarkCanonical measures what a new JSON body costs to fingerprint,
// with two references run on the same bytes in the same process so that
// benchstat -col /impl shows the ratios directly:
//
//	impl=raw-sha256      SHA-256 of the raw body: the floor of any hash of it
//	impl=json-roundtrip  encoding/json into any and back (sorted keys,
//	                     compact), then SHA-256: the obvious way to hash
//	                     JSON canonically with the standard library
//	impl=idem            Builder.Sum with the default configuration on a
//	                     body it has not seen (its trace_id changes every
//	                     iteration, so the memo of recent inputs never
//	                     answers): scan, validate, filter, canonicalize, hash
//	impl=idem-nomemo     the same digest without the memo: Sum less the
//	                     fast hash that notes a body's first sighting
//
// Every implementation rewrites the same eight bytes of its body each
// iteration.
func BenchmarkCanonical(b *testing.B) {
	fb := newBuilder(b)
	impls := []struct {
		name string
		run  func(b *testing.B, body []byte)
	}{
		{"raw-sha256", func(b *testing.B, body []byte) { _ = sha256.Sum256(body) }},
		{"json-roundtrip", func(b *testing.B, body []byte) {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
			out, err := json.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			_ = sha256.Sum256(out)
		}},
		{"idem", func(b *testing.B, body []byte) {
			if _, err := fb.Sum(body); err != nil {
				b.Fatal(err)
			}
		}},
		{"idem-nomemo", func(b *testing.B, body []byte) {
			w := getWork()
			w.out = append(w.out, domain...)
			if err := w.jsonBody(fb, jsonType, body); err != nil {
				b.Fatal(err)
			}
			_ = digest(w.out)
			putWork(w)
		}},
	}
	for _, impl := range impls {
		for _, size := range paymentSizes {
			body, next := varying(b, paymentJSON(size.n))
			b.Run("impl="+impl.name+"/"+size.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					next()
					impl.run(b, body)
				}
			})
		}
	}
}

// TestPaymentBodies keeps the benchmark bodies honest: valid, near their
// nominal size, deterministic, and accepted by a Builder.
func TestPaymentBodies(t *testing.T) {
	fb := newBuilder(t)
	for _, size := range paymentSizes {
		body := paymentJSON(size.n)
		if !json.Valid(body) {
			t.Errorf("%s: invalid JSON", size.name)
		}
		if len(body) < size.n*9/10 || len(body) > size.n*11/10 {
			t.Errorf("%s: %d bytes", size.name, len(body))
		}
		if string(paymentJSON(size.n)) != string(body) {
			t.Errorf("%s: not deterministic", size.name)
		}
		if _, err := fb.Sum(body); err != nil {
			t.Errorf("%s: %v", size.name, err)
		}
	}
}

// TestNoMemoDigest keeps impl=idem-nomemo honest: it computes the digest
// Sum returns.
func TestNoMemoDigest(t *testing.T) {
	fb := newBuilder(t)
	for _, size := range paymentSizes {
		body := paymentJSON(size.n)
		want, err := fb.Sum(body)
		if err != nil {
			t.Fatal(err)
		}
		w := getWork()
		w.out = append(w.out, domain...)
		if err := w.jsonBody(fb, jsonType, body); err != nil {
			t.Fatal(err)
		}
		if got := digest(w.out); got != want {
			t.Errorf("%s: %s, Sum says %s", size.name, got, want)
		}
		putWork(w)
	}
}
