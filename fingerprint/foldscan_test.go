package fingerprint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNameClass checks nameClass against the byte-wise definition.
func TestNameClass(t *testing.T) {
	ref := func(b []byte) (foldy, wide bool) {
		for _, c := range b {
			foldy = foldy || 'A' <= c && c <= 'Z' || c >= 0x80
			wide = wide || c >= 0x80
		}
		return foldy, wide
	}
	check := func(b []byte) {
		rf, rw := ref(b)
		c := nameClass(b)
		if f, w := c&fFoldy != 0, c&fWide != 0; f != rf || w != rw {
			t.Fatalf("nameClass(%q) = %v, %v; want %v, %v", b, f, w, rf, rw)
		}
	}
	edge := []byte{0, '@', 'A', 'M', 'Z', '[', '`', 'a', 'z', '{', 0x7f, 0x80, 0xbf, 0xc3, 0xff}
	for _, a := range edge {
		for _, b := range edge {
			for _, c := range edge {
				check([]byte{a})
				check([]byte{a, b})
				check([]byte{a, b, c})
			}
		}
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for range 100000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = "abcxyz_09-"[rng.IntN(10)]
		}
		check(b)
		if len(b) > 0 {
			b[rng.IntN(len(b))] = edge[rng.IntN(len(edge))]
			check(b)
		}
	}
}

// TestFoldCheckAgainstReference compares a Builder's verdict on objects of
// every size, both sides of foldSmall, with encoding/json's tokenizer and
// strings.EqualFold.
func TestFoldCheckAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 20))
	parts := []string{"a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "σ", "ς", "Σ", "é", "É", "ß", "ẞ", "_", "1", "ab", "AB"}
	b := newBuilder(t, WithDefaultDeny(false))
	clashes := 0
	for i := range 4000 {
		n := rng.IntN(2*foldSmall) + 1
		seen := map[string]bool{}
		var body strings.Builder
		body.WriteString("{")
		for range n {
			var name strings.Builder
			for range rng.IntN(3) + 1 {
				name.WriteString(parts[rng.IntN(len(parts))])
			}
			if seen[name.String()] {
				continue
			}
			seen[name.String()] = true
			if len(seen) > 1 {
				body.WriteString(",")
			}
			fmt.Fprintf(&body, "%s:%d", quoteJSON(name.String()), len(seen))
		}
		body.WriteString("}")
		in := []byte(body.String())
		_, err := b.Canonicalize(in)
		want := foldClash(t, in)
		if want {
			clashes++
		}
		if errors.Is(err, ErrAmbiguousMember) != want || (!want && err != nil) {
			t.Fatalf("case %d: %s: %v; the reference says clash=%v", i, in, err, want)
		}
	}
	if clashes < 1000 || clashes > 3500 {
		t.Errorf("%d of 4000 objects clash; the generator no longer probes both verdicts", clashes)
	}
}

// TestAmbiguousAtEveryLength moves the one upper-case letter of a name
// through every position of names of every length up to 20, written
// plainly and with escapes (read from the input and from decoded text),
// so that no word boundary of the look for foldy names hides it.
func TestAmbiguousAtEveryLength(t *testing.T) {
	b := newBuilder(t)
	for n := 1; n <= 20; n++ {
		lower := strings.Repeat("q", n)
		for i := range n {
			upper := lower[:i] + "Q" + lower[i+1:]
			esc := strings.ReplaceAll(upper, "q", `\u0071`)
			for _, in := range []string{
				fmt.Sprintf(`{"%s":1,"%s":2}`, lower, upper),
				fmt.Sprintf(`{"%s":1,"%s":2}`, upper, lower),
				fmt.Sprintf(`{"%s":1,"%s":2,"\u0041":3}`, lower, esc),
				fmt.Sprintf(`{"%s":1,"\u0078":2,"%s":3}`, esc, lower),
			} {
				if _, err := b.Sum([]byte(in)); !errors.Is(err, ErrAmbiguousMember) {
					t.Fatalf("%s: %v, want ErrAmbiguousMember", in, err)
				}
			}
		}
		// Lower-case names followed by upper-case text stay fine.
		in := fmt.Sprintf(`{"\u0071%s":1,"ABCDEFGHIJ":2}`, lower)
		if _, err := b.Sum([]byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
	}
}

// TestSkipPlainKey: skipPlainKey stops where skipPlain does and sees every
// upper-case letter on the way, in words and in the tail.
func TestSkipPlainKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	alphabet := []byte("abcxyz_09-AMZ@[`{\"\\\x01\x7f\xc3\xa9")
	for range 200000 {
		in := make([]byte, rng.IntN(30))
		for i := range in {
			if rng.IntN(6) == 0 {
				in[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				in[i] = "abcdefgh"[rng.IntN(8)]
			}
		}
		start := rng.IntN(len(in) + 1)
		j, upper := skipPlainKey(in, start)
		if want := skipPlain(in, start); j != want {
			t.Fatalf("skipPlainKey(%q, %d) stops at %d, skipPlain at %d", in, start, j, want)
		}
		want := false
		for _, c := range in[start:j] {
			want = want || 'A' <= c && c <= 'Z'
		}
		if upper != want {
			t.Fatalf("skipPlainKey(%q, %d) = %d, %v; want upper %v", in, start, j, upper, want)
		}
	}
}

// TestFoldKeyFlags: the flags a name gets while it is scanned are those
// nameClass gives its unescaped text, however it is written.
func TestFoldKeyFlags(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	parts := []string{"a", "z", "A", "Z", "_", "é", "\u212a", `\u0041`, `\u0061`, `\u00e9`, `\n`, `\"`, "0123456789", "abcdefgh"}
	var p parser
	for range 20000 {
		var name strings.Builder
		for range rng.IntN(5) {
			name.WriteString(parts[rng.IntN(len(parts))])
		}
		in := []byte(`{"` + name.String() + `":1}`)
		p.reset(in, 10, foldNames)
		if err := p.parse(); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		k := int32(1)
		if got, want := p.toks[k].flags&(fFoldy|fWide), nameClass(p.keyBytes(k)); got != want {
			t.Fatalf("%s: flags %b, nameClass %b", in, got, want)
		}
	}
}
