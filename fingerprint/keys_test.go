package fingerprint

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNamePrefix checks the word read of namePrefix against the bytes, at
// every length, with and without a word's room after the name, and the
// remapping of lead bytes.
func TestNamePrefix(t *testing.T) {
	ref := func(name string) uint64 {
		var x uint64
		for i := 0; i < 8 && i < len(name); i++ {
			x |= uint64(utf16Lead[name[i]]) << (56 - 8*i)
		}
		return x
	}
	for _, name := range []string{"", "a", "ab", "abc", "abcdefg", "abcdefgh", "abcdefghi", "a\x00", "\x00", "é", "\ue000x", "\U0001F600", "\uffff\uffff\uffff"} {
		for _, tail := range []string{"", `":1234567890`} {
			buf := []byte(`"` + name + tail)
			if got, want := namePrefix(buf, 1, int32(1+len(name))), ref(name); got != want {
				t.Errorf("namePrefix(%q) with %q after = %#x, want %#x", name, tail, got, want)
			}
		}
	}
	if utf16Lead[0xF0] >= utf16Lead[0xEE] || utf16Lead[0xF4] >= utf16Lead[0xEE] || utf16Lead[0xED] >= utf16Lead[0xF0] || utf16Lead[0xEF] <= utf16Lead[0xEE] {
		t.Error("utf16Lead does not put the four-byte leads between 0xED and 0xEE")
	}
}

// TestComparePrefix checks that names whose prefixes differ sort by them
// as compareUTF16 and the code-unit reference sort the names, and that
// equal prefixes mean equal first eight bytes, on random names built from
// pieces that meet at every byte class the order depends on.
func TestComparePrefix(t *testing.T) {
	pieces := []string{"", "a", "b", "A", "\x00", "\x7f", "é", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001F600", "\U0010FFFF", "abcdefgh"}
	rng := rand.New(rand.NewPCG(1, 2))
	name := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for range 200000 {
		x, y := name(), name()
		px := namePrefix([]byte(x), 0, int32(len(x)))
		py := namePrefix([]byte(y), 0, int32(len(y)))
		c := comparePrefix(px, py)
		if c == 0 {
			if x[:min(8, len(x))]+strings.Repeat("\x00", 8-min(8, len(x))) != y[:min(8, len(y))]+strings.Repeat("\x00", 8-min(8, len(y))) {
				t.Fatalf("%q and %q: equal prefixes, different first bytes", x, y)
			}
			continue
		}
		if want := compareRef(x, y); sign(c) != want {
			t.Fatalf("comparePrefix(%q, %q) = %d, want sign %d", x, y, c, want)
		}
	}
}
