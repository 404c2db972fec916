package fingerprint

import (
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAllowMatchesFoldedNames: an allow path reaches the member a Go
// handler reads for that name, whatever its case; deny paths and the
// opt-out match exactly.
func TestAllowMatchesFoldedNames(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		opts        []Option
		in, want    string
	}{
		{name: "upper case", allow: []string{"amount"},
			in: `{"AMOUNT":5,"note":"x"}`, want: `{"AMOUNT":5}`},
		{name: "nested", allow: []string{"customer.id"},
			in: `{"Customer":{"ID":"c1","name":"x"}}`, want: `{"Customer":{"ID":"c1"}}`},
		{name: "array elements", allow: []string{"items[*].sku"},
			in: `{"items":[{"\u017fku":"A"},{"SKU":"B"},{"qty":1}]}`, want: `{"items":[{"ſku":"A"},{"SKU":"B"},null]}`},
		{name: "kelvin sign", allow: []string{"k"},
			in: `{"\u212a":1,"x":2}`, want: "{\"\u212a\":1}"},
		{name: "non-ASCII path", allow: []string{"straße"},
			in: `{"STRAẞE":1,"strasse":2}`, want: `{"STRAẞE":1}`},
		{name: "any depth", allow: []string{"**.Id"},
			in: `{"a":{"id":1,"x":2},"ID":3}`, want: `{"ID":3,"a":{"id":1}}`},
		{name: "look-alikes stay out", allow: []string{"ss", "i"},
			in: `{"ß":1,"İ":2,"ı":3}`, want: `{}`},
		{name: "deny matches exactly", allow: []string{"customer"}, deny: []string{"customer.name"},
			in: `{"customer":{"Name":"x","id":1}}`, want: `{"customer":{"Name":"x","id":1}}`},
		{name: "opt-out matches exactly", allow: []string{"amount"}, opts: []Option{WithCaseSensitiveNames(true)},
			in: `{"AMOUNT":5,"amount":1}`, want: `{"amount":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(t, append(tt.opts, WithAllow(tt.allow...), WithDeny(tt.deny...))...)
			got, err := b.Canonicalize([]byte(tt.in))
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	// The hole through an allow-list: a handler reads 5 and 500.
	b := newBuilder(t, WithAllow("amount"))
	x, err1 := b.Sum([]byte(`{"Amount":5}`))
	y, err2 := b.Sum([]byte(`{"Amount":500}`))
	if err1 != nil || err2 != nil || x == y {
		t.Errorf("allow-list: %s %v, %s %v; want two digests", x, err1, y, err2)
	}
	// Form bodies: the allow-list applies to their names the same way.
	form := func(body string) string {
		r := httptest.NewRequest("POST", "/pay", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		d, err := b.Request(r)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if form("Amount=5") == form("Amount=500") {
		t.Error("form: a case variant of an allowed name does not count")
	}
}

func TestEqualFoldName(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	alphabet := []rune("aAkKsSſσςΣßẞ\u212a_é")
	for range 100000 {
		var x, y []rune
		for range rng.IntN(4) {
			x = append(x, alphabet[rng.IntN(len(alphabet))])
		}
		for range rng.IntN(4) {
			y = append(y, alphabet[rng.IntN(len(alphabet))])
		}
		if got, want := equalFoldName(string(x), []byte(string(y))), strings.EqualFold(string(x), string(y)); got != want {
			t.Fatalf("equalFoldName(%q, %q) = %v, want %v", string(x), string(y), got, want)
		}
	}
}
