package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// sentinels are the errors bad input may produce.
var sentinels = []error{ErrInvalidJSON, ErrDuplicateMember, ErrAmbiguousMember, ErrNumberRange, ErrInvalidString, ErrTooDeep, ErrBodyTooLarge}

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
// what the input meant. It checks a Builder's canonical form alongside
// (see checkBuilderForm).
func FuzzCanonicalize(f *testing.F) {
	for _, s := range append(fuzzSeeds, goSeeds...) {
		f.Add([]byte(s))
	}
	b := newBuilder(f, WithDefaultDeny(false))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		checkBuilderForm(t, b, in, out, err)
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

// checkBuilderForm checks the canonical form of in by b, a Builder without
// field lists, against RFC 8785's (out, err): b accepts the same texts,
// less those with two names of one object equal under case folding, which
// it refuses exactly; its form is canonical to b; and it differs from
// RFC 8785's only in the digits of integers, so that RFC 8785 reads it as
// out.
func checkBuilderForm(t *testing.T, b *Builder, in, out []byte, err error) {
	t.Helper()
	bout, berr := b.Canonicalize(in)
	switch {
	case err != nil && berr == nil:
		t.Fatalf("the Builder accepts %q, which RFC 8785 refuses: %v", in, err)
	case err != nil:
		if !isSentinel(berr) {
			t.Fatalf("Builder error %v is none of the sentinels", berr)
		}
		return
	}
	if clash := foldClash(t, in); clash != errors.Is(berr, ErrAmbiguousMember) {
		t.Fatalf("names of %q equal under folding: %v; the Builder says %v", in, clash, berr)
	}
	if berr != nil {
		if !errors.Is(berr, ErrAmbiguousMember) {
			t.Fatalf("the Builder refuses %q, which RFC 8785 accepts: %v", in, berr)
		}
		return
	}
	if again, err := b.Canonicalize(bout); err != nil || !bytes.Equal(again, bout) {
		t.Fatalf("Builder form not idempotent: %q -> %q -> %q (%v)", in, bout, again, err)
	}
	if rfc, err := Canonicalize(bout); err != nil || !bytes.Equal(rfc, out) {
		t.Fatalf("RFC 8785 reads the Builder's form %q of %q as %q (%v), not %q", bout, in, rfc, err, out)
	}
}

// foldClash reports whether an object in the valid JSON text in has two
// different names that bytes.EqualFold holds equal: a walk with
// encoding/json's tokenizer, the reference for checkFold.
func foldClash(t *testing.T, in []byte) bool {
	t.Helper()
	type frame struct {
		obj, key bool // an object, expecting a name next
		names    []string
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var stack []frame
	clash := false
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return clash
		}
		if err != nil {
			t.Fatalf("encoding/json on %q: %v", in, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{obj: tok == json.Delim('{'), key: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].key {
			name := tok.(string)
			for _, o := range stack[n-1].names {
				if o != name && strings.EqualFold(o, name) {
					clash = true
				}
			}
			stack[n-1].names = append(stack[n-1].names, name)
			stack[n-1].key = false
			continue
		}
		valueDone()
	}
}

// FuzzSumStable checks that re-serializing a body (other key order, other
// whitespace, other escapes and number spellings, as encoding/json writes
// them) never changes its digest. A number with a fraction or an exponent
// is re-spelled as the double encoding/json reads; an integer keeps its
// digits, since a Builder counts all of them.
func FuzzSumStable(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	b := newBuilder(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		d1, err := b.Sum(in)
		if err != nil || len(in) == 0 {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Sum accepted what encoding/json rejects: %v", err)
		}
		re, err := json.MarshalIndent(floatsOnly(t, v), "", "   ")
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

// floatsOnly turns every json.Number in v that is not an integer literal
// into the float64 encoding/json would have decoded, so that marshaling v
// re-spells those numbers and keeps the integers' digits.
func floatsOnly(t *testing.T, v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = floatsOnly(t, e)
		}
	case []any:
		for i, e := range v {
			v[i] = floatsOnly(t, e)
		}
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			return v
		}
		f, err := v.Float64()
		if err != nil {
			t.Fatalf("Sum accepted the number %s: %v", v, err)
		}
		return f
	}
	return v
}

// FuzzNumber checks that every way a number is written (kept as sent,
// rewritten as text, or converted through a double) agrees with the
// conversion through a double, the reference of RFC 8785, and that a
// Builder keeps the digits of integers.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0.0", "4.50", "1E30", "0.000001", "1e-7", "123456789012345", "1234567890123456",
		"333333333.33333329", "9.999999999999999e290", "1e291", "5e-324", "1e400", "0.1e1", "100e-2"} {
		f.Add(s)
	}
	b := newBuilder(f)
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
		exact, berr := b.Canonicalize([]byte(lit))
		v, perr := strconv.ParseFloat(lit, 64)
		if perr != nil {
			if !errors.Is(err, ErrNumberRange) || !errors.Is(berr, ErrNumberRange) {
				t.Fatalf("Canonicalize(%s) = %s, %v, Builder %s, %v; want ErrNumberRange", lit, got, err, exact, berr)
			}
			return
		}
		want := string(appendES6(nil, v))
		if err != nil || string(got) != want {
			t.Fatalf("Canonicalize(%s) = %s, %v; want %s", lit, got, err, want)
		}
		// A Builder writes an integer by its digits, anything else as
		// RFC 8785 does.
		if !strings.ContainsAny(lit, ".eE") && v != 0 {
			want = lit
		}
		if berr != nil || string(exact) != want {
			t.Fatalf("Builder.Canonicalize(%s) = %s, %v; want %s", lit, exact, berr, want)
		}
	})
}
