package fingerprint

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestSkipPlain checks the eight-bytes-at-a-time scan against the table for
// every byte value at every position of a word and of the tail.
func TestSkipPlain(t *testing.T) {
	for c := range 256 {
		for pos := range 20 {
			in := bytes.Repeat([]byte{'a'}, 20)
			in[pos] = byte(c)
			want := 20
			for j, b := range in {
				if !plain[b] {
					want = j
					break
				}
			}
			if got := skipPlain(in, 0); got != want {
				t.Fatalf("byte 0x%02x at %d: skipPlain = %d, want %d", c, pos, got, want)
			}
		}
	}
}

func TestAppendQuoted(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "abc", `"abc"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other controls", "\x00\x01\x1f\x0b", `"\u0000\u0001\u001f\u000b"`},
		{"del and unicode", "\x7f\u00e9\u2028\U0001F600", "\"\x7f\u00e9\u2028\U0001F600\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendQuoted(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestSkipPlainFirstOfMany checks the word scan where a word holds several
// bytes that are not plain: it must stop at the first.
func TestSkipPlainFirstOfMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab\"\\\x00\x01\x1f\x20\x7f\x80\xc3\xa9\xff!#[]")
	for range 300000 {
		in := make([]byte, rng.IntN(40))
		for i := range in {
			if rng.IntN(4) == 0 {
				in[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				in[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		start := rng.IntN(len(in) + 1)
		want := start
		for want < len(in) && plain[in[want]] {
			want++
		}
		if got := skipPlain(in, start); got != want {
			t.Fatalf("skipPlain(%q, %d) = %d, want %d", in, start, got, want)
		}
	}
}
