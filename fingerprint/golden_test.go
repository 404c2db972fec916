package fingerprint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"
)

const orderBody = `{
  "amount": 1999, "currency": "EUR",
  "customer": {"id": "cus_42", "email": "ana@example.com"},
  "items": [{"sku": "A-1", "qty": 2, "price": 4.5, "client_ts": 1700000000}, {"sku": "B-7", "qty": 1, "price": 10.99}],
  "metadata": {"trace_id": "4bf92f3577b34da6", "note": "leave at the door \u263a"},
  "timestamp": "2024-05-01T10:00:00Z", "nonce": "8f1c"
}`

// TestGoldenDigests pins digests that must never change across machines or
// releases while the prefix stays "f1:". If one of these fails, the format
// changed: that needs a new Prefix, not a new golden value.
func TestGoldenDigests(t *testing.T) {
	sum := func(b *Builder, body string) func() (string, error) {
		return func() (string, error) { return b.Sum([]byte(body)) }
	}
	request := func(b *Builder, method, target, ct, body string, header ...string) func() (string, error) {
		return func() (string, error) {
			r := httptest.NewRequest(method, target, strings.NewReader(body))
			if ct != "" {
				r.Header.Set("Content-Type", ct)
			}
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Add(header[i], header[i+1])
			}
			return b.Request(r)
		}
	}
	tests := []struct {
		name string
		get  func() (string, error)
		want string
	}{
		{"empty object", sum(newBuilder(t), `{}`), "f1:9163c2a703634f00109492bdcd567f5a5d41ddc3738e36c0bb4ef6f4aac93882"},
		{"empty body", sum(newBuilder(t), ``), "f1:3665f8cac731ced58dd021c6e733e67c082cd09a300e448a69ef56050a9d8a7d"},
		{"order", sum(newBuilder(t), orderBody), "f1:851652053cc896f6587a83c5646eece3b53285054e7e6d140e0121797c8ed251"},
		{"order with deny", sum(newBuilder(t, WithDeny("items[*].client_ts")), orderBody), "f1:14d0308f1a894945a1e982f9a0c70226fa3bafaac5429bb0b098d3a33af65831"},
		{"order with allow", sum(newBuilder(t, WithAllow("amount", "currency", "items[*].sku", "items[*].qty")), orderBody), "f1:3f2a0357a963e1a823f27eae85103955e5399906be0c12cf4141516d41db1cc6"},
		{"numbers and strings", sum(newBuilder(t), `[1e21, -0, 0.1, 333333333.33333329, "\u20ac\u0000\ud83d\ude00"]`), "f1:dac10d5474227968421f1aa48b37d7ce69d6f1328aa3479424480d03fbd4526c"},
		{"request json", request(newBuilder(t), "POST", "/orders", "application/json", orderBody), "f1:2886c96c8c123dce40a504a206e44edd31a0f257eb30781b78c6763eb8f2ba21"},
		{"request query and headers", request(newBuilder(t, WithHeaders("X-Tenant")), "POST", "/orders/7/refunds?reason=dup&notify=1&notify=2", "application/json", `{"amount":5}`, "X-Tenant", "acme"), "f1:e32b96b6acb889595b52ee160bbd7bdd76bbf910fad55e493494363a55f7dafc"},
		{"request form", request(newBuilder(t), "POST", "/checkout", "application/x-www-form-urlencoded", "qty=2&sku=A-1&nonce=x&note=a+b%21"), "f1:cd868c3c0c5d73305c104e9eb327f19e4dc334bb30a4c35c03bb60d35cd10bc5"},
		{"request bytes", request(newBuilder(t), "PUT", "/files/report.csv", "text/csv", "a,b\n1,2\n"), "f1:a88976c49d2f967f7fad6f7b70f9b47c3f05864f73a4b0d238cde374c9b9e063"},
		{"request no body", request(newBuilder(t), "DELETE", "/orders/7", "", ""), "f1:3f46b1c91ecd220f9275fa702f6baddbcd4ba8d061ef77c7de269bb16aa8b863"},
		// Integers beyond 2^53 count by their digits:
		// {"amount":9007199254740993,"fee":18446744073709551616,"ref":-12345678901234567890123}.
		{"exact integers", sum(newBuilder(t), `{"amount": 9007199254740993, "fee": 18446744073709551616, "ref": -12345678901234567890123}`), "f1:bc5bc331156a4f7cf6b10f5643299cd5d5e56908b5b18f72c7d2ba24a587145c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("digest %s, want %s", got, tt.want)
			}
		})
	}
}

// TestDigestFraming rebuilds two messages from the documented framing by
// hand, so that the format is pinned by its description too.
func TestDigestFraming(t *testing.T) {
	str := func(s string) []byte {
		return append(binary.BigEndian.AppendUint64([]byte{0}, uint64(len(s))), s...)
	}
	count := func(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
	part := func(tag byte, content ...[]byte) []byte {
		c := bytes.Join(content, nil)
		return append(binary.BigEndian.AppendUint64([]byte{tag}, uint64(len(c))), c...)
	}
	hash := func(msg []byte) string {
		sum := sha256.Sum256(msg)
		return Prefix + hex.EncodeToString(sum[:])
	}

	msg := []byte("idem.fingerprint.v1\x00")
	msg = append(msg, part('B', []byte{'j'}, str("application/json"), []byte(`{"a":1,"b":[true,null]}`))...)
	got, err := newBuilder(t).Sum([]byte(`{"b":[true,null],"a":1.0,"nonce":7}`))
	if err != nil || got != hash(msg) {
		t.Errorf("Sum: %s (%v), want %s", got, err, hash(msg))
	}

	msg = []byte("idem.fingerprint.v1\x00")
	msg = append(msg, part('M', []byte("POST"))...)
	msg = append(msg, part('R', []byte("/o"))...)
	msg = append(msg, part('Q', count(2), str("a"), str("1"), str("b"), str(""))...)
	msg = append(msg, part('H', count(1), str("X-Tenant"), count(1), str("acme"))...)
	msg = append(msg, part('B', []byte{'e'})...)
	r := httptest.NewRequest("POST", "/o?b&a=1", nil)
	r.Header.Set("X-Tenant", "acme")
	got, err = newBuilder(t, WithHeaders("x-tenant")).Request(r)
	if err != nil || got != hash(msg) {
		t.Errorf("Request: %s (%v), want %s", got, err, hash(msg))
	}
}
