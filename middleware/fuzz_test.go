package middleware_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
)

// quote returns k as an RFC 8941 string.
func quote(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

// FuzzParseKeyHeader checks the grammar's promises on any header value: a key is
// 1–255 bytes of printable ASCII, quoting it gives the same key back, and
// its bare form (when it has one) does too.
func FuzzParseKeyHeader(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b\\c"`, `"abc`, `"a\qb"`, `"abc";p=1`, "a, b", "", `""`, " \tk ", "clé", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := middleware.ParseKeyHeader([]string{v})
		if err != nil {
			if !errors.Is(err, middleware.ErrMalformedKey) {
				t.Fatalf("ParseKeyHeader(%q): %v does not wrap ErrMalformedKey", v, err)
			}
			return
		}
		if len(k) < 1 || len(k) > middleware.MaxKeyLen {
			t.Fatalf("ParseKeyHeader(%q) = %d bytes", v, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKeyHeader(%q) = %q has byte %#x", v, k, k[i])
			}
		}
		if got, err := middleware.ParseKeyHeader([]string{quote(k)}); err != nil || got != k {
			t.Fatalf("quoted %q gives %q, %v; want %q", quote(k), got, err, k)
		}
		if k[0] != '"' && !strings.ContainsRune(k, ',') && strings.Trim(k, " ") == k {
			if got, err := middleware.ParseKeyHeader([]string{k}); err != nil || got != k {
				t.Fatalf("bare %q gives %q, %v", k, got, err)
			}
		}
		if _, err := middleware.ParseKeyHeader([]string{v, v}); !errors.Is(err, middleware.ErrMalformedKey) {
			t.Fatalf("two lines of %q: %v", v, err)
		}
	})
}
