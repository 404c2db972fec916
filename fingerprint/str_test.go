package fingerprint

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
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

// TestUTF8Len checks utf8Len against utf8.DecodeRune on every sequence of
// up to three bytes that starts with a byte of 0x80 or above, whole and cut
// short, followed by a continuation byte where a four-byte form needs one.
func TestUTF8Len(t *testing.T) {
	want := func(b []byte) int {
		if r, size := utf8.DecodeRune(b); r != utf8.RuneError || size > 1 {
			return size
		}
		return 0
	}
	b := make([]byte, 4)
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := range 0x100 {
			for c2 := range 0x100 {
				b[0], b[1], b[2], b[3] = byte(c0), byte(c1), byte(c2), 0x80
				for _, n := range []int{1, 2, 3, 4} {
					if c2 > 0 && n < 3 || c1 > 0 && n < 2 {
						continue // the shorter forms once each
					}
					if got, w := utf8Len(b[:n], 0), want(b[:n]); got != w {
						t.Fatalf("utf8Len(% x) = %d, want %d", b[:n], got, w)
					}
				}
			}
		}
	}
}
