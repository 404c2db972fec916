package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
)

// sentinels are the errors bad input may produce.
var sentinels = []error{ErrInvalidJSON, ErrDuplicateMember, ErrNumberRange, ErrInvalidString, ErrTooDeep, ErrTooLarge}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

var fuzzSeeds = []string{
	`{"b":[1,2.50,{"d":null,"c":true}],"a":"x"}`,
	`{"\ud83d\ude00":1,"\ue000":2,"\u0080":3}`,
	`"\ud800"`,
	`[1e21,1e-7,-0,5e-324,1.7976931348623157e308,123456789012345678901234567890]`,
	`{"a":1,"a":2}`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// FuzzCanonicalize checks that Canonicalize never panics, that it accepts
// exactly the JSON that encoding/json accepts less what I-JSON forbids, and
// that its output is canonical (a second pass changes nothing) and means
// what the input meant.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v is none of the sentinels", err)
			}
			if errors.Is(err, ErrInvalidJSON) && json.Valid(in) {
				t.Fatalf("rejected valid JSON %q: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q as %q", in, out)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, in)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("encoding/json rejects the input: %v", err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("encoding/json rejects the output: %v", err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %q -> %q", in, out)
		}
	})
}

// FuzzSumStable checks that re-serializing a body (other key order, other
// whitespace, other escapes and number spellings, as encoding/json writes
// them) never changes its digest.
func FuzzSumStable(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	b := New()
	f.Fuzz(func(t *testing.T, in []byte) {
		d1, err := b.Sum(in)
		if err != nil || len(in) == 0 {
			return
		}
		var v any
		if err := json.Unmarshal(in, &v); err != nil {
			t.Fatalf("Sum accepted what encoding/json rejects: %v", err)
		}
		re, err := json.MarshalIndent(v, "", "   ")
		if err != nil {
			t.Fatalf("MarshalIndent: %v", err)
		}
		if d2, err := b.Sum(re); err != nil || d2 != d1 {
			t.Fatalf("re-marshaled body hashes differently: %q -> %q (%v)", in, re, err)
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, in, "\n", "\t "); err != nil {
			t.Fatalf("Indent: %v", err)
		}
		if d3, err := b.Sum(ind.Bytes()); err != nil || d3 != d1 {
			t.Fatalf("re-indented body hashes differently: %q -> %q (%v)", in, ind.Bytes(), err)
		}
	})
}

// FuzzNumber checks that every way a number is written (kept as sent,
// rewritten as text, or converted through a double) agrees with the
// conversion through a double, the reference of RFC 8785.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "4.50", "1E30", "0.000001", "1e-7", "123456789012345", "1234567890123456",
		"333333333.33333329", "9.999999999999999e290", "1e291", "5e-324", "1e400", "0.1e1", "100e-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if !json.Valid([]byte(lit)) || len(lit) == 0 || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
			return
		}
		for _, c := range []byte(lit) {
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				return
			}
		}
		got, err := Canonicalize([]byte(lit))
		v, perr := strconv.ParseFloat(lit, 64)
		if perr != nil {
			if !errors.Is(err, ErrNumberRange) {
				t.Fatalf("Canonicalize(%s) = %s, %v; want ErrNumberRange", lit, got, err)
			}
			return
		}
		if want := string(appendES6(nil, v)); err != nil || string(got) != want {
			t.Fatalf("Canonicalize(%s) = %s, %v; want %s", lit, got, err, want)
		}
	})
}
