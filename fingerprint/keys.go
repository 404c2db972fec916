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

// sortKeys sorts the key tokens of one object by name. Small objects, the
// common case, use an insertion sort that needs no closure.
func sortKeys(p *parser, keys []int32) {
	if len(keys) <= 12 {
		for i := 1; i < len(keys); i++ {
			k := keys[i]
			kb := p.keyBytes(k)
			j := i
			for j > 0 && compareUTF16(p.keyBytes(keys[j-1]), kb) > 0 {
				keys[j] = keys[j-1]
				j--
			}
			keys[j] = k
		}
		return
	}
	slices.SortFunc(keys, func(x, y int32) int {
		return compareUTF16(p.keyBytes(x), p.keyBytes(y))
	})
}

func dupError(name []byte) error {
	return fmt.Errorf("%w: %q", ErrDuplicateMember, name)
}
