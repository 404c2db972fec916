package fingerprint

import (
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

// keyRef is a member name, as the span of its key token (in the input, or
// in p.dec when the name held escapes), and the token, sorted together. It
// holds no pointer, so that sorting costs the garbage collector nothing
// (no write barriers) and the scratch slice needs no clearing.
type keyRef struct {
	a, b  int32
	tok   int32
	flags uint8 // the key token's: fDecoded, and fFoldy, fWide in foldNames mode
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
		refs = append(refs, keyRef{a: t.a, b: t.b, tok: k, flags: t.flags})
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
		slices.SortFunc(refs, func(x, y keyRef) int { return compareUTF16(p.refName(x), p.refName(y)) })
		for j := 1; j < len(refs); j++ {
			if string(p.refName(refs[j-1])) == string(p.refName(refs[j])) {
				return dupError(p.refName(refs[j]))
			}
		}
	}
	return nil
}

func dupError(name []byte) error {
	return fmt.Errorf("%w: %q", ErrDuplicateMember, name)
}
