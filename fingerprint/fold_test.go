package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// ambiguousPairs are member names that differ but are one name to
// encoding/json's struct field matching.
var ambiguousPairs = [][2]string{
	{"amount", "AMOUNT"},
	{"amount", "Amount"},
	{"customerId", "customerID"},
	{"k", "K"},
	{"k", "\u212a"},              // KELVIN SIGN
	{"K", "\u212a"},              // KELVIN SIGN
	{"key", "\u212aey"},          // KELVIN SIGN inside a name
	{"s", "\u017f"},              // LONG S
	{"sku", "\u017fKU"},          // LONG S, and case
	{"Σ", "σ"},                   // GREEK SIGMA, capital and small
	{"σ", "ς"},                   // small and final
	{"ς", "Σ"},                   // final and capital
	{"ǆ", "ǅ"},                   // a title-case letter
	{"ß", "ẞ"},                   // sharp s, small and capital
	{"straße", "STRAẞE"},         // mixed ASCII and non-ASCII
	{"ÿ", "Ÿ"},                   // Latin-1 small, Latin Extended-A capital
	{"\U00010428", "\U00010400"}, // DESERET, outside the BMP
}

// distinctNames are names that look alike but that encoding/json keeps
// apart: folding is simple, one rune to one rune.
var distinctNames = [][2]string{
	{"ss", "ß"}, // only full case folding maps ß to ss
	{"i", "İ"},  // dotted capital I folds to nothing else
	{"i", "ı"},  // dotless small i
	{"trace_id", "traceId"},
	{"amount", "amount_"},
	{"a", "á"},
	{"ﬀ", "ff"}, // a ligature
	{"k", "ķ"},
}

// fieldOf decodes body with encoding/json into a struct whose one int
// field is tagged name, and returns the field's value: encoding/json's own
// answer to which member fills it.
func fieldOf(t *testing.T, name, body string) int {
	t.Helper()
	typ := reflect.StructOf([]reflect.StructField{{
		Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(fmt.Sprintf(`json:%q`, name)),
	}})
	v := reflect.New(typ)
	if err := json.Unmarshal([]byte(body), v.Interface()); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return int(v.Elem().Field(0).Int())
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestFoldingIsEncodingJSONs checks the premise against encoding/json
// itself: for each ambiguous pair, both members fill the field named by
// the first and the last one wins; for each distinct pair, only the exact
// name does.
func TestFoldingIsEncodingJSONs(t *testing.T) {
	for _, p := range ambiguousPairs {
		body := fmt.Sprintf(`{%s:1,%s:2}`, quoteJSON(p[0]), quoteJSON(p[1]))
		rev := fmt.Sprintf(`{%s:2,%s:1}`, quoteJSON(p[1]), quoteJSON(p[0]))
		if got := fieldOf(t, p[0], body); got != 2 {
			t.Errorf("%q, %q: the field reads %d from %s, want the last member", p[0], p[1], got, body)
		}
		if x, y := fieldOf(t, p[0], body), fieldOf(t, p[0], rev); x == y {
			t.Errorf("%q, %q: both orders read %d", p[0], p[1], x)
		}
		if !bytes.EqualFold([]byte(p[0]), []byte(p[1])) || compareFold([]byte(p[0]), []byte(p[1])) != 0 {
			t.Errorf("%q, %q: not equal under folding here", p[0], p[1])
		}
	}
	for _, p := range distinctNames {
		body := fmt.Sprintf(`{%s:1,%s:2}`, quoteJSON(p[0]), quoteJSON(p[1]))
		if got := fieldOf(t, p[0], body); got != 1 {
			t.Errorf("%q, %q: the field reads %d from %s, want only the exact member", p[0], p[1], got, body)
		}
		if bytes.EqualFold([]byte(p[0]), []byte(p[1])) || compareFold([]byte(p[0]), []byte(p[1])) == 0 {
			t.Errorf("%q, %q: equal under folding here", p[0], p[1])
		}
	}
}

// TestCompareFold checks compareFold against bytes.EqualFold for every
// rune and the members of its folding orbit, and on random names, and that
// it is an order (antisymmetric, consistent with equality).
func TestCompareFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		x := []byte(string(r))
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if compareFold(x, []byte(string(o))) != 0 {
				t.Fatalf("%U and %U fold alike but compare unequal", r, o)
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 8))
	alphabet := []rune("aAbBkKsSſzZ_1ßẞσςΣǅǆǄİıiIéÉ\u212a\U00010428\U00010400")
	name := func() []byte {
		var b []byte
		for range rng.IntN(4) {
			b = utf8.AppendRune(b, alphabet[rng.IntN(len(alphabet))])
		}
		return b
	}
	for range 200000 {
		x, y := name(), name()
		c := compareFold(x, y)
		if (c == 0) != bytes.EqualFold(x, y) {
			t.Fatalf("compareFold(%q, %q) = %d, bytes.EqualFold says %v", x, y, c, bytes.EqualFold(x, y))
		}
		if sign(compareFold(y, x)) != -sign(c) {
			t.Fatalf("compareFold(%q, %q) not antisymmetric", x, y)
		}
	}
}

// TestAmbiguousMembers: a Builder refuses two names of one object that a
// Go handler would read as one, at any depth, whatever its field lists;
// Canonicalize, which is RFC 8785, accepts them.
func TestAmbiguousMembers(t *testing.T) {
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 30 {
			fmt.Fprintf(&b, `"Field%02d":%d,`, i, i)
		}
		b.WriteString(extra + "}")
		return b.String()
	}
	tests := []struct {
		name string
		in   string
		opts []Option
	}{
		{name: "issue example", in: `{"amount":100,"AMOUNT":5}`},
		{name: "issue example reversed", in: `{"AMOUNT":5,"amount":100}`},
		{name: "nested", in: `{"order":{"customer":{"id":"a","ID":"b"}}}`},
		{name: "array of objects", in: `{"items":[{"sku":"A","qty":1},{"sku":"B","qty":2,"Qty":3}]}`},
		{name: "top-level array", in: `[{"x":1},{"x":1,"X":1}]`},
		{name: "same values", in: `{"amount":1,"Amount":1}`},
		{name: "escaped name", in: `{"amount":1,"\u0041mount":2}`},
		{name: "kelvin sign", in: `{"k":1,"\u212a":2}`},
		{name: "kelvin sign raw", in: "{\"key\":1,\"\u212aey\":2}"},
		{name: "long s", in: `{"s":1,"\u017f":2}`},
		{name: "sigma", in: `{"Σ":1,"σ":2}`},
		{name: "final sigma", in: `{"σ":1,"ς":2}`},
		{name: "final and capital sigma", in: `{"ς":1,"Σ":2}`},
		{name: "many members", in: many(`"field29":1`)},
		{name: "many members, non-ASCII", in: many(`"\u017fku":1,"SKU":2`)},
		{name: "many members, kelvin", in: many(`"\u212a":1,"k":2`)},
		{name: "default deny-listed", in: `{"nonce":"a","NONCE":"b"}`},
		{name: "deny-listed", in: `{"amount":1,"Amount":2}`, opts: []Option{WithDeny("amount", "Amount")}},
		{name: "deny-listed subtree", in: `{"meta":{"a":1,"A":2}}`, opts: []Option{WithDeny("meta")}},
		{name: "outside the allow-list", in: `{"x":1,"note":{"a":1,"A":2}}`, opts: []Option{WithAllow("x")}},
		{name: "deny-listed, many members", in: many(`"field00":1`), opts: []Option{WithDeny("**.field00", "**.Field00")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Canonicalize([]byte(tt.in)); err != nil {
				t.Fatalf("Canonicalize (RFC 8785) refuses it: %v", err)
			}
			b := newBuilder(t, tt.opts...)
			_, err := b.Sum([]byte(tt.in))
			if !errors.Is(err, ErrAmbiguousMember) {
				t.Fatalf("Sum: %v, want ErrAmbiguousMember", err)
			}
			if !strings.HasPrefix(err.Error(), "fingerprint: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if _, err := b.Canonicalize([]byte(tt.in)); !errors.Is(err, ErrAmbiguousMember) {
				t.Errorf("Builder.Canonicalize: %v", err)
			}
			r := httptest.NewRequest("POST", "/orders", strings.NewReader(tt.in))
			r.Header.Set("Content-Type", "application/json")
			if _, err := b.Request(r); !errors.Is(err, ErrAmbiguousMember) {
				t.Errorf("Request: %v", err)
			}
			if _, err := b.RequestBody(r, []byte(tt.in)); !errors.Is(err, ErrAmbiguousMember) {
				t.Errorf("RequestBody: %v", err)
			}
			// Refused the same way when the memo would know the body.
			for range 3 {
				if _, err := b.Sum([]byte(tt.in)); !errors.Is(err, ErrAmbiguousMember) {
					t.Errorf("Sum again: %v", err)
				}
			}
			// The opt-out accepts it as RFC 8785 does.
			cs := newBuilder(t, append(tt.opts, WithCaseSensitiveNames(true))...)
			if _, err := cs.Sum([]byte(tt.in)); err != nil {
				t.Errorf("WithCaseSensitiveNames(true): %v", err)
			}
		})
	}
}

func TestAmbiguousMemberNames(t *testing.T) {
	_, err := newBuilder(t).Sum([]byte(`{"b":0,"amount":100,"AMOUNT":5}`))
	if err == nil || !strings.Contains(err.Error(), `"AMOUNT" and "amount"`) {
		t.Errorf("got %v, want both names in it", err)
	}
	_, err = newBuilder(t).Sum([]byte(`{"sku":0,"field":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"\u017fKU":17}`))
	if err == nil || !strings.Contains(err.Error(), `"sku" and "ſKU"`) {
		t.Errorf("many members: got %v, want both names in it", err)
	}
}

// TestUnambiguousMembers: names that only look alike, and duplicates,
// keep their old verdicts.
func TestUnambiguousMembers(t *testing.T) {
	for _, p := range distinctNames {
		in := fmt.Sprintf(`{%s:1,%s:2}`, quoteJSON(p[0]), quoteJSON(p[1]))
		if _, err := newBuilder(t).Sum([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	for _, in := range []string{`{"a":1,"a":2}`, `{"A":1,"A":2}`, `{"a":1,"A":2,"a":3}`} {
		for _, b := range []*Builder{newBuilder(t), newBuilder(t, WithCaseSensitiveNames(true))} {
			if _, err := b.Sum([]byte(in)); !errors.Is(err, ErrDuplicateMember) {
				t.Errorf("%s: %v, want ErrDuplicateMember", in, err)
			}
		}
	}
	// Members of different objects never clash.
	for _, in := range []string{`{"a":{"x":1},"b":{"X":1}}`, `[{"a":1},{"A":1}]`} {
		if _, err := newBuilder(t).Sum([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// TestCaseSensitiveNames: with the opt-out, the two orders of the issue's
// body are one RFC 8785 object again, and the digest is that object's.
func TestCaseSensitiveNames(t *testing.T) {
	b := newBuilder(t, WithCaseSensitiveNames(true))
	x, err1 := b.Sum([]byte(`{"amount":100,"AMOUNT":5}`))
	y, err2 := b.Sum([]byte(`{"AMOUNT":5,"amount":100}`))
	if err1 != nil || err2 != nil || x != y {
		t.Errorf("got %s %v, %s %v; want one digest", x, err1, y, err2)
	}
	z, err := b.Sum([]byte(`{"AMOUNT":100,"amount":5}`))
	if err != nil || z == x {
		t.Errorf("swapped values: %s %v", z, err)
	}
}
