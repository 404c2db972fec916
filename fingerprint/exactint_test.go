package fingerprint

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestExactIntegers: a Builder writes an integer literal by its digits, so
// that integers encoding/json reads into different int64s or uint64s get
// different fingerprints; up to 2^53 that is the ES6 form RFC 8785 writes,
// and literals with a fraction or an exponent keep that form too.
func TestExactIntegers(t *testing.T) {
	r309 := "1" + strings.Repeat("0", 308)
	tests := []struct {
		name, in, builder, rfc string
	}{
		{"2^53-1", `9007199254740991`, `9007199254740991`, `9007199254740991`},
		{"2^53", `9007199254740992`, `9007199254740992`, `9007199254740992`},
		{"2^53+1", `9007199254740993`, `9007199254740993`, `9007199254740992`},
		{"-(2^53+1)", `-9007199254740993`, `-9007199254740993`, `-9007199254740992`},
		{"-(2^53)", `-9007199254740992`, `-9007199254740992`, `-9007199254740992`},
		{"max int64", `9223372036854775807`, `9223372036854775807`, `9223372036854776000`},
		{"min int64", `-9223372036854775808`, `-9223372036854775808`, `-9223372036854776000`},
		{"2^64", `18446744073709551616`, `18446744073709551616`, `18446744073709552000`},
		{"2^64 as ES6 writes it", `18446744073709552000`, `18446744073709552000`, `18446744073709552000`},
		{"10^21 as an integer", `1000000000000000000000`, `1000000000000000000000`, `1e+21`},
		{"1e21", `1e21`, `1e+21`, `1e+21`},
		{"10^21 with a fraction", `1000000000000000000000.0`, `1e+21`, `1e+21`},
		{"2^53+1 with a fraction", `9007199254740993.0`, `9007199254740992`, `9007199254740992`},
		{"2^53+1 with an exponent", `9.007199254740993e15`, `9007199254740992`, `9007199254740992`},
		{"309 digits", r309, r309, `1e+308`},
		{"minus zero", `-0`, `0`, `0`},
		{"small", `[0,-1,42,123456789012345]`, `[0,-1,42,123456789012345]`, `[0,-1,42,123456789012345]`},
		{"nested", `{"a":[{"b":12345678901234567890}]}`, `{"a":[{"b":12345678901234567890}]}`, `{"a":[{"b":12345678901234567000}]}`},
	}
	b := newBuilder(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.Canonicalize([]byte(tt.in))
			if err != nil || string(got) != tt.builder {
				t.Errorf("Builder.Canonicalize = %s, %v; want %s", got, err, tt.builder)
			}
			got, err = Canonicalize([]byte(tt.in))
			if err != nil || string(got) != tt.rfc {
				t.Errorf("Canonicalize = %s, %v; want %s", got, err, tt.rfc)
			}
			// The digest is the digest of the Builder's form.
			d1, err1 := b.Sum([]byte(tt.in))
			d2, err2 := b.Sum([]byte(tt.builder))
			if err1 != nil || err2 != nil || d1 != d2 {
				t.Errorf("Sum of the body and of its canonical form differ: %s %v, %s %v", d1, err1, d2, err2)
			}
		})
	}
}

// TestExactIntegersRange: an integer literal must still fit a double,
// as every number must, with or without exact integers.
func TestExactIntegersRange(t *testing.T) {
	// 2^1024 - 2^970 is the smallest integer that rounds to infinity.
	inf := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 1024), new(big.Int).Lsh(big.NewInt(1), 970))
	below := new(big.Int).Sub(inf, big.NewInt(1)).String()
	for _, in := range []string{inf.String(), "-" + inf.String(), "1" + strings.Repeat("0", 309), "-" + strings.Repeat("9", 400)} {
		for _, b := range []*Builder{newBuilder(t), newBuilder(t, WithCaseSensitiveNames(true))} {
			if _, err := b.Sum([]byte(in)); !errors.Is(err, ErrNumberRange) {
				t.Errorf("Sum(%.20s…): %v, want ErrNumberRange", in, err)
			}
		}
		if _, err := Canonicalize([]byte(in)); !errors.Is(err, ErrNumberRange) {
			t.Errorf("Canonicalize(%.20s…): %v, want ErrNumberRange", in, err)
		}
	}
	for _, in := range []string{below, strconv.FormatFloat(math.MaxFloat64, 'f', -1, 64), "-" + below} {
		got, err := newBuilder(t).Canonicalize([]byte(in))
		if err != nil || string(got) != in {
			t.Errorf("Builder.Canonicalize(%.20s…) = %.20s…, %v; want it as written", in, got, err)
		}
		if _, err := Canonicalize([]byte(in)); err != nil {
			t.Errorf("Canonicalize(%.20s…): %v", in, err)
		}
	}
}

// TestExactIntegersKeepSmallForms: up to 2^53 in magnitude, an integer's
// digits are its ES6 form, so the Builder writes what it wrote before and
// no digest of such a body changes.
func TestExactIntegersKeepSmallForms(t *testing.T) {
	const two53 = 1 << 53
	lits := []int64{0, 1, -1, 9, 10, 999999999999999, 1000000000000000, 1234567890123456, two53 - 1, two53, -two53, -(two53 - 1)}
	rng := rand.New(rand.NewPCG(4, 9))
	for range 20000 {
		n := rng.Int64N(two53 + 1)
		if rng.IntN(2) == 0 {
			n = -n
		}
		lits = append(lits, n, n/int64(math.Pow10(rng.IntN(16))))
	}
	b := newBuilder(t)
	for _, n := range lits {
		lit := strconv.FormatInt(n, 10)
		got, err := b.Canonicalize([]byte(lit))
		want := string(appendES6(nil, float64(n)))
		if err != nil || string(got) != want {
			t.Fatalf("Builder.Canonicalize(%s) = %s, %v; want the ES6 form %s", lit, got, err, want)
		}
	}
}

// TestIssueExamplesAtSum: the two examples of the issue are different
// requests to a Go handler, and no longer share a digest.
func TestIssueExamplesAtSum(t *testing.T) {
	var x, y struct {
		Amount int64 `json:"amount"`
	}
	if err := json.Unmarshal([]byte(`{"amount":9007199254740993}`), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"amount":9007199254740992}`), &y); err != nil {
		t.Fatal(err)
	}
	if x == y {
		t.Fatal("encoding/json reads the two integers alike")
	}
	b := newBuilder(t)
	d1, err1 := b.Sum([]byte(`{"amount":9007199254740993}`))
	d2, err2 := b.Sum([]byte(`{"amount":9007199254740992}`))
	if err1 != nil || err2 != nil || d1 == d2 {
		t.Errorf("integers above 2^53: %s %v, %s %v; want two digests", d1, err1, d2, err2)
	}
	d3, err3 := b.Sum([]byte(`{"amount":18446744073709551616}`))
	d4, err4 := b.Sum([]byte(`{"amount":18446744073709552000}`))
	if err3 != nil || err4 != nil || d3 == d4 {
		t.Errorf("2^64 and its double's ES6 form: %s %v, %s %v; want two digests", d3, err3, d4, err4)
	}
	d5, _ := b.Sum([]byte(`{"amount":1000000000000000000000}`))
	d6, _ := b.Sum([]byte(`{"amount":1e21}`))
	if d5 == d6 {
		t.Error("10^21 as an integer and as 1e21 share a digest")
	}
	if _, err := b.Sum([]byte(`{"amount":100,"AMOUNT":5}`)); !errors.Is(err, ErrAmbiguousMember) {
		t.Errorf("ambiguous names: %v, want ErrAmbiguousMember", err)
	}
}

// TestIssueExamplesAtRequest: the same through Request and RequestBody,
// the path of the HTTP middleware.
func TestIssueExamplesAtRequest(t *testing.T) {
	req := func(body string) (string, error) {
		r := httptest.NewRequest("POST", "/payments", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return newBuilder(t).Request(r)
	}
	for _, body := range []string{`{"amount":100,"AMOUNT":5}`, `{"AMOUNT":5,"amount":100}`} {
		if _, err := req(body); !errors.Is(err, ErrAmbiguousMember) {
			t.Errorf("%s: %v, want ErrAmbiguousMember", body, err)
		}
	}
	d1, err1 := req(`{"amount":9007199254740993}`)
	d2, err2 := req(`{"amount":9007199254740992}`)
	if err1 != nil || err2 != nil || d1 == d2 {
		t.Errorf("integers above 2^53: %s %v, %s %v; want two digests", d1, err1, d2, err2)
	}
	r := httptest.NewRequest("POST", "/payments", nil)
	r.Header.Set("Content-Type", "application/merge-patch+json")
	if _, err := newBuilder(t).RequestBody(r, []byte(`{"x":{"Σ":1,"ς":2}}`)); !errors.Is(err, ErrAmbiguousMember) {
		t.Errorf("RequestBody, +json: %v, want ErrAmbiguousMember", err)
	}
	// Form bodies and query strings are read case-sensitively by Go.
	r = httptest.NewRequest("POST", "/payments?a=1&A=2", strings.NewReader("amount=1&AMOUNT=2"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if _, err := newBuilder(t).Request(r); err != nil {
		t.Errorf("form and query with case variants: %v", err)
	}
}
