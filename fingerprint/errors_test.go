package fingerprint

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", ``, ErrInvalidJSON},
		{"blank", " \n\t", ErrInvalidJSON},
		{"bom", "\ufeff{}", ErrInvalidJSON},
		{"trailing data", `{} {}`, ErrInvalidJSON},
		{"trailing comma object", `{"a":1,}`, ErrInvalidJSON},
		{"trailing comma array", `[1,]`, ErrInvalidJSON},
		{"missing colon", `{"a" 1}`, ErrInvalidJSON},
		{"missing value", `{"a":}`, ErrInvalidJSON},
		{"unquoted key", `{a:1}`, ErrInvalidJSON},
		{"single quotes", `{'a':1}`, ErrInvalidJSON},
		{"unclosed object", `{"a":1`, ErrInvalidJSON},
		{"unclosed array", `[1,2`, ErrInvalidJSON},
		{"mismatched close", `[1}`, ErrInvalidJSON},
		{"unterminated string", `"abc`, ErrInvalidJSON},
		{"unterminated escape", `"abc\`, ErrInvalidJSON},
		{"bad literal", `tru`, ErrInvalidJSON},
		{"literal case", `True`, ErrInvalidJSON},
		{"nan", `NaN`, ErrInvalidJSON},
		{"infinity", `[Infinity]`, ErrInvalidJSON},
		{"leading zero", `01`, ErrInvalidJSON},
		{"leading plus", `+1`, ErrInvalidJSON},
		{"bare minus", `-`, ErrInvalidJSON},
		{"dot without digits", `1.`, ErrInvalidJSON},
		{"leading dot", `.5`, ErrInvalidJSON},
		{"exponent without digits", `1e`, ErrInvalidJSON},
		{"exponent sign only", `1e+`, ErrInvalidJSON},
		{"hex number", `0x10`, ErrInvalidJSON},
		{"comment", `[1 /* c */]`, ErrInvalidJSON},
		{"duplicate", `{"a":1,"a":2}`, ErrDuplicateMember},
		{"duplicate after unescape", `{"a":1,"\u0061":2}`, ErrDuplicateMember},
		{"duplicate nested", `[{"x":{"k":1,"j":0,"k":null}}]`, ErrDuplicateMember},
		{"duplicate in many", `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"a":1}`, ErrDuplicateMember},
		{"overflow", `1e309`, ErrNumberRange},
		{"negative overflow", `[-1.8e308]`, ErrNumberRange},
		{"huge exponent", `1e99999999999999999999`, ErrNumberRange},
		{"long overflow", `1` + strings.Repeat("0", 400), ErrNumberRange},
		{"lone high surrogate", `"\ud800"`, ErrInvalidString},
		{"lone high then text", `"\ud800abcdef"`, ErrInvalidString},
		{"high then high", `"\ud800\ud800"`, ErrInvalidString},
		{"high then escape", `"\ud800\n"`, ErrInvalidString},
		{"lone low surrogate", `"\udc00"`, ErrInvalidString},
		{"reversed pair", `"\ude00\ud83d"`, ErrInvalidString},
		{"lone surrogate in key", `{"\udfff":1}`, ErrInvalidString},
		{"bad hex", `"\u12g4"`, ErrInvalidString},
		{"short hex", `"\u12"`, ErrInvalidString},
		{"bad escape", `"\x41"`, ErrInvalidString},
		{"raw control", "\"a\x01b\"", ErrInvalidString},
		{"raw newline", "\"a\nb\"", ErrInvalidString},
		{"raw tab after escape", "\"\\n\t\"", ErrInvalidString},
		{"invalid utf8", "\"\xff\"", ErrInvalidString},
		{"truncated utf8", "\"\xe2\x82\"", ErrInvalidString},
		{"overlong utf8", "\"\xc0\xaf\"", ErrInvalidString},
		{"utf8 surrogate", "\"\xed\xa0\x80\"", ErrInvalidString},
		{"invalid utf8 in key", "{\"\xfe\":1}", ErrInvalidString},
		{"invalid utf8 after escape", "\"\\n\xff\"", ErrInvalidString},
		{"too deep arrays", strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), ErrTooDeep},
		{"too deep objects", strings.Repeat(`{"a":`, DefaultMaxDepth+1) + "1" + strings.Repeat("}", DefaultMaxDepth+1), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonicalize(%.40q) = %q, %v; want %v", tt.in, got, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "fingerprint: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			// The Builder agrees, with and without field lists.
			for _, b := range []*Builder{newBuilder(t), newBuilder(t, WithDeny("**.a", "**.x"), WithAllow("b"))} {
				if _, err := b.Sum([]byte(tt.in)); !errors.Is(err, tt.want) && !(tt.in == "" && err == nil) {
					t.Errorf("Sum: %v, want %v", err, tt.want)
				}
			}
		})
	}
}

func TestErrorOffset(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a": [1, 2,, 3]}`))
	if err == nil || !strings.Contains(err.Error(), "offset 12") {
		t.Errorf("got %v, want the offset 12 in it", err)
	}
}

func TestDepthLimit(t *testing.T) {
	tests := []struct {
		name  string
		depth int
		opts  []Option
		want  error
	}{
		{"at the default limit", DefaultMaxDepth, nil, nil},
		{"past the default limit", DefaultMaxDepth + 1, nil, ErrTooDeep},
		{"100000 deep", 100000, nil, ErrTooDeep},
		{"custom limit", 11, []Option{WithMaxDepth(10)}, ErrTooDeep},
		{"within custom limit", 10, []Option{WithMaxDepth(10)}, nil},
		{"no limit: the ceiling", MaxDepthLimit, []Option{WithMaxDepth(0)}, nil},
		{"no limit, past the ceiling", MaxDepthLimit + 1, []Option{WithMaxDepth(0)}, ErrTooDeep},
		{"at the ceiling", MaxDepthLimit, []Option{WithMaxDepth(1 << 30)}, nil},
		{"past the ceiling", MaxDepthLimit + 1, []Option{WithMaxDepth(1 << 30)}, ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Repeat("[", tt.depth) + strings.Repeat("]", tt.depth)
			_, err := newBuilder(t, tt.opts...).Sum([]byte(in))
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			// Unclosed: the limit trips before the end of input is seen.
			if tt.want != nil {
				_, err = newBuilder(t, tt.opts...).Sum([]byte(strings.Repeat(`{"a":[`, tt.depth)))
				if !errors.Is(err, ErrTooDeep) {
					t.Errorf("unclosed: got %v", err)
				}
			}
		})
	}
	if _, err := New(WithMaxDepth(-1)); err == nil || !strings.Contains(err.Error(), "WithMaxDepth") {
		t.Errorf("New(WithMaxDepth(-1)): %v, want an error naming the option", err)
	}
}

// TestLargeBody pushes a 50 MiB body through: over the default limit it
// fails at once; with the limit raised it works (on a smaller body under
// the race detector).
func TestLargeBody(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MiB body")
	}
	body := largeBody(50 << 20)
	start := time.Now()
	_, err := newBuilder(t).Sum(body)
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("default limit: got %v, want ErrBodyTooLarge", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
	if raceEnabled {
		body = largeBody(4 << 20) // the same code, in a tenth of a minute
	}
	b := newBuilder(t, WithMaxBytes(64<<20))
	d1, err := b.Sum(body)
	if err != nil {
		t.Fatalf("raised limit: %v", err)
	}
	c, err := Canonicalize(body)
	if err != nil {
		t.Fatalf("Canonicalize: %v", err)
	}
	if len(c) == 0 || len(c) > len(body) {
		t.Errorf("canonical length %d for a body of %d", len(c), len(body))
	}
	d2, err := b.Sum(c)
	if err != nil || d1 != d2 {
		t.Errorf("canonical form hashes differently: %s %s %v", d1, d2, err)
	}
}

// largeBody returns a JSON array of order-like objects of at least n bytes.
func largeBody(n int) []byte {
	var buf bytes.Buffer
	buf.Grow(n + 1024)
	buf.WriteString("[\n")
	for i := 0; buf.Len() < n; i++ {
		if i > 0 {
			buf.WriteString(",\n")
		}
		buf.WriteString(`  {"sku": "SKU-`)
		buf.WriteString(strings.Repeat("x", i%7))
		buf.WriteString(`", "qty": 3, "price": 12.50, "note": "caf\u00e9 \"quoted\"", "trace_id": "abc", "tags": ["a", "b"]}`)
	}
	buf.WriteString("\n]")
	return buf.Bytes()
}

func TestMaxBytes(t *testing.T) {
	body := []byte(`{"amount": 100}`)
	if _, err := newBuilder(t, WithMaxBytes(int64(len(body)-1))).Sum(body); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("one byte over: %v", err)
	}
	if _, err := newBuilder(t, WithMaxBytes(int64(len(body)))).Sum(body); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if b := newBuilder(t, WithMaxBytes(0)); b.maxBytes != HardMaxBytes {
		t.Errorf("WithMaxBytes(0): a limit of %d, want no limit but HardMaxBytes", b.maxBytes)
	}
	if _, err := New(WithMaxBytes(-1)); err == nil || !strings.Contains(err.Error(), "WithMaxBytes") {
		t.Errorf("New(WithMaxBytes(-1)): %v, want an error naming the option", err)
	}
}
