package fingerprint

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// compareUTF16 orders two valid UTF-8 strings as RFC 8785 §3.2.3 orders
// member names: by their UTF-16 code units. UTF-8 byte order is code point
// order, which differs from UTF-16 order in one place only: a supplementary
// character (four UTF-8 bytes, lead 0xF0..0xF4; a surrogate pair 0xD800..
// 0xDBFF in UTF-16) sorts before U+E000..U+FFFF (lead 0xEE or 0xEF).
//
// Both strings share every rune before the first differing byte, so that
// byte sits at the same position of a rune in both; only when it is a lead
// byte can the two runes be of those two classes.
func compareUTF16(x, y []byte) int {
	n := min(len(x), len(y))
	i := 0
	for i < n && x[i] == y[i] {
		i++
	}
	if i == n {
		return len(x) - len(y)
	}
	a, b := x[i], y[i]
	switch {
	case a >= 0xF0 && (b == 0xEE || b == 0xEF):
		return -1
	case b >= 0xF0 && (a == 0xEE || a == 0xEF):
		return 1
	}
	return int(a) - int(b)
}

// namePrefix returns the first eight bytes of the name buf[a:b] as a
// big-endian number, zero bytes standing in for those past its end, with
// the lead bytes of four-byte sequences (0xF0..0xF4) moved below those of
// U+E000..U+FFFF (0xEE, 0xEF): two names whose prefixes differ then sort
// as their prefixes do (comparePrefix), in UTF-16 order. It reads a whole
// word past the name's end when buf has one.
func namePrefix(buf []byte, a, b int32) uint64 {
	n := int(b - a)
	var x uint64
	switch {
	case n >= 8:
		x = binary.BigEndian.Uint64(buf[a:])
	case int(a)+8 <= len(buf):
		x = binary.BigEndian.Uint64(buf[a:]) &^ (^uint64(0) >> (8 * n))
	default:
		for i, c := range buf[a:b] {
			x |= uint64(c) << (56 - 8*i)
		}
	}
	if x&hi8 != 0 {
		var y uint64
		for s := 56; s >= 0; s -= 8 {
			y |= uint64(utf16Lead[byte(x>>s)]) << s
		}
		x = y
	}
	return x
}

// utf16Lead maps a byte of valid UTF-8 to one that sorts in UTF-16 order:
// the only bytes it moves are lead bytes, which never meet a continuation
// byte at the first difference of two names. U+0000..U+D7FF (leads up to
// 0xED) sort first, then the supplementary characters, which UTF-16 writes
// as surrogates 0xD800..0xDFFF (leads 0xF0..0xF4, mapped to 0xEE..0xF2),
// then U+E000..U+FFFF (leads 0xEE, 0xEF, mapped to 0xF3, 0xF4). Bytes
// 0xF5..0xFF never occur in valid UTF-8.
var utf16Lead = func() (t [256]byte) {
	for c := range t {
		t[c] = byte(c)
	}
	for c := 0xF0; c <= 0xF4; c++ {
		t[c] = byte(c - 2)
	}
	t[0xEE], t[0xEF] = 0xF3, 0xF4
	return t
}()

// comparePrefix orders two names by their prefixes px and py (namePrefix)
// as compareUTF16 orders the names, when the prefixes differ; it returns 0
// when they do not, and the names must be compared. The first byte that
// differs is a byte of both names, or a zero past the end of the shorter,
// which then is a prefix of the other and sorts first, as in
// compareUTF16.
func comparePrefix(px, py uint64) int {
	switch {
	case px < py:
		return -1
	case px > py:
		return 1
	}
	return 0
}

// compareRefs orders two names as compareUTF16 does.
func (p *parser) compareRefs(x, y keyRef) int {
	if c := comparePrefix(x.pre, y.pre); c != 0 {
		return c
	}
	return compareUTF16(p.refName(x), p.refName(y))
}

// keyRef is a member name, as the span of its key token (in the input, or
// in p.dec when the name held escapes), and the token, sorted together. It
// holds no pointer, so that sorting costs the garbage collector nothing
// (no write barriers) and the scratch slice needs no clearing. The stream
// writer keeps one per member of its open objects, with where the member
// lies in its output.
type keyRef struct {
	pre   uint64 // namePrefix of the name
	a, b  int32
	tok   int32 // token parser: the key token
	start int32 // stream writer: where the member ("name":value) starts in the output
	end   int32 // stream writer: where its value ends in the output
	cut   int32 // stream writer: where the output goes back to when the member is dropped, before its comma
	flags uint8 // the key token's: fDecoded, and fFoldy, fWide in foldNames mode
	drop  bool  // stream writer: a "**.name" deny path drops the member
}

// refName returns the unescaped name r spans.
func (p *parser) refName(r keyRef) []byte {
	if r.flags&fDecoded != 0 {
		return p.dec[r.a:r.b]
	}
	return p.in[r.a:r.b]
}

// sortKeys sorts the key tokens of one object by name and reports a
// duplicate name (see sortRefs).
func (p *parser) sortKeys(keys []int32) error {
	refs := p.refs[:0]
	for _, k := range keys {
		t := p.toks[k]
		buf := p.in
		if t.flags&fDecoded != 0 {
			buf = p.dec
		}
		refs = append(refs, keyRef{pre: namePrefix(buf, t.a, t.b), a: t.a, b: t.b, tok: k, flags: t.flags})
	}
	p.refs = refs
	if err := p.sortRefs(refs); err != nil {
		return err
	}
	for i, r := range refs {
		keys[i] = r.tok
	}
	return nil
}

// sortRefs sorts the names refs of one object and reports a duplicate name.
// Small objects, the common case, use an insertion sort: it compares every
// pair that ends up adjacent, so a duplicate shows as a comparison that
// returns 0.
func (p *parser) sortRefs(refs []keyRef) error {
	if len(refs) <= 12 {
		for i := 1; i < len(refs); i++ {
			r := refs[i]
			name := p.refName(r)
			j := i
			for ; j > 0; j-- {
				c := compareUTF16(p.refName(refs[j-1]), name)
				if c == 0 {
					return dupError(name)
				}
				if c < 0 {
					break
				}
				refs[j] = refs[j-1]
			}
			refs[j] = r
		}
	} else {
		slices.SortFunc(refs, p.compareRefs)
		for j := 1; j < len(refs); j++ {
			if refs[j-1].pre == refs[j].pre && string(p.refName(refs[j-1])) == string(p.refName(refs[j])) {
				return dupError(p.refName(refs[j]))
			}
		}
	}
	return nil
}

func dupError(name []byte) error {
	return fmt.Errorf("%w: %q", ErrDuplicateMember, name)
}
