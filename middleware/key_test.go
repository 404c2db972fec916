package middleware_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
)

func TestParseKeyHeader(t *testing.T) {
	long := strings.Repeat("k", middleware.MaxKeyLen)
	for _, c := range []struct {
		name   string
		values []string
		want   string
		err    error
	}{
		{"bare", []string{"abc"}, "abc", nil},
		{"uuid", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"quoted", []string{`"abc"`}, "abc", nil},
		{"quoted escapes", []string{`"a\"b\\c"`}, `a"b\c`, nil},
		{"quoted comma", []string{`"a, b"`}, "a, b", nil},
		{"bare quote inside", []string{`a"b`}, `a"b`, nil},
		{"bare backslash", []string{`a\b`}, `a\b`, nil},
		{"spaces around", []string{" \tabc \t"}, "abc", nil},
		{"inner space", []string{"a b"}, "a b", nil},
		{"255 bytes", []string{long}, long, nil},
		{"255 bytes quoted", []string{`"` + long + `"`}, long, nil},
		{"255 bytes with escapes", []string{`"\\` + long[1:] + `"`}, `\` + long[1:], nil},
		{"none", nil, "", middleware.ErrNoKey},
		{"two lines", []string{"a", "b"}, "", middleware.ErrMalformedKey},
		{"two equal lines", []string{"a", "a"}, "", middleware.ErrMalformedKey},
		{"empty", []string{""}, "", middleware.ErrMalformedKey},
		{"blank", []string{"  "}, "", middleware.ErrMalformedKey},
		{"256 bytes", []string{long + "k"}, "", middleware.ErrMalformedKey},
		{"256 bytes quoted", []string{`"` + long + `k"`}, "", middleware.ErrMalformedKey},
		{"tab inside", []string{"a\tb"}, "", middleware.ErrMalformedKey},
		{"newline", []string{"a\nb"}, "", middleware.ErrMalformedKey},
		{"NUL", []string{"a\x00b"}, "", middleware.ErrMalformedKey},
		{"DEL", []string{"a\x7fb"}, "", middleware.ErrMalformedKey},
		{"not ASCII", []string{"clé"}, "", middleware.ErrMalformedKey},
		{"not ASCII quoted", []string{`"clé"`}, "", middleware.ErrMalformedKey},
		{"control quoted", []string{"\"a\x01\""}, "", middleware.ErrMalformedKey},
		{"comma", []string{"a,b"}, "", middleware.ErrMalformedKey},
		{"empty string", []string{`""`}, "", middleware.ErrMalformedKey},
		{"lone quote", []string{`"`}, "", middleware.ErrMalformedKey},
		{"unterminated", []string{`"abc`}, "", middleware.ErrMalformedKey},
		{"escaped end", []string{`"abc\"`}, "", middleware.ErrMalformedKey},
		{"trailing backslash", []string{`"abc\`}, "", middleware.ErrMalformedKey},
		{"bad escape", []string{`"a\nb"`}, "", middleware.ErrMalformedKey},
		{"after quote", []string{`"abc"d`}, "", middleware.ErrMalformedKey},
		{"parameters", []string{`"abc";a=1`}, "", middleware.ErrMalformedKey},
		{"list", []string{`"a", "b"`}, "", middleware.ErrMalformedKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := middleware.ParseKeyHeader(c.values)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("ParseKeyHeader(%q) error %v, want %v", c.values, err, c.err)
			}
			if got != c.want {
				t.Fatalf("ParseKeyHeader(%q) = %q, want %q", c.values, got, c.want)
			}
			if err != nil && len(c.values) == 1 && len(c.values[0]) > 3 && strings.Contains(err.Error(), c.values[0]) {
				t.Fatalf("error %q repeats the key", err)
			}
		})
	}
}

func TestParseKeyHeaderAllocs(t *testing.T) {
	bare := []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}
	quoted := []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}
	for _, v := range [][]string{bare, quoted} {
		if n := testing.AllocsPerRun(100, func() { _, _ = middleware.ParseKeyHeader(v) }); n != 0 {
			t.Errorf("ParseKeyHeader(%q) allocates %v times", v, n)
		}
	}
}
