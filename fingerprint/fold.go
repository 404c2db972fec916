package fingerprint

import (
	"bytes"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// encoding/json matches a member name to a struct field exactly and, when
// no field has exactly that name, under Unicode simple case folding (the
// equivalence of bytes.EqualFold), and the last member that matches wins.
// So {"amount":100,"AMOUNT":5} and {"AMOUNT":5,"amount":100}, one object to
// RFC 8785, are 5 and 100 to a Go handler. A Builder therefore refuses two
// names of one object that are equal under that folding, at any depth.

// foldy marks the bytes that folding may treat as equal to another byte
// sequence: the ASCII upper-case letters, and every byte of a multi-byte
// UTF-8 sequence (U+212A KELVIN SIGN folds to 'k', U+017F LONG S to 's').
// Two names free of them (lower-case ASCII, digits, punctuation) are equal
// under folding only if they are equal.
var foldy = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// foldSmall is the largest object whose names are compared pair by pair;
// larger ones are sorted by their folded form.
const foldSmall = 16

// checkFold reports two names of the object just sorted into p.refs that
// differ but are equal under case folding. Exact duplicates were reported
// already. Most objects have no name with a byte folding could change, and
// cost one look at each byte of their names.
func (p *parser) checkFold() error {
	refs := p.refs
	var flagged, wide uint32 // per name, for small objects: foldy byte, non-ASCII byte
	some := false
	for i, r := range refs {
		f, w := foldClass(p.refName(r))
		if f {
			some = true
			if i < foldSmall {
				flagged |= 1 << i
				if w {
					wide |= 1 << i
				}
			}
		}
	}
	if !some {
		return nil
	}
	if len(refs) <= foldSmall {
		for i := range refs {
			x := p.refName(refs[i])
			for j := i + 1; j < len(refs); j++ {
				if (flagged>>i|flagged>>j)&1 == 0 {
					continue // neither name has a byte folding could change
				}
				y := p.refName(refs[j])
				if len(x) != len(y) && (wide>>i|wide>>j)&1 == 0 {
					continue // ASCII folding keeps the length
				}
				if bytes.EqualFold(x, y) {
					return ambiguousError(x, y)
				}
			}
		}
		return nil
	}
	fs := append(p.fold[:0], refs...)
	p.fold = fs
	slices.SortFunc(fs, func(x, y keyRef) int { return compareFold(p.refName(x), p.refName(y)) })
	for j := 1; j < len(fs); j++ {
		if x, y := p.refName(fs[j-1]), p.refName(fs[j]); compareFold(x, y) == 0 {
			if compareUTF16(x, y) > 0 {
				x, y = y, x
			}
			return ambiguousError(x, y)
		}
	}
	return nil
}

// foldClass reports whether name holds a byte folding may change, and
// whether it holds a non-ASCII byte.
func foldClass(name []byte) (foldable, wide bool) {
	for _, c := range name {
		if foldy[c] {
			foldable = true
			if c >= utf8.RuneSelf {
				return true, true
			}
		}
	}
	return foldable, false
}

// compareFold orders two valid UTF-8 names by their case-folded runes. It
// returns 0 exactly when bytes.EqualFold(x, y) holds, so that sorting by
// it puts names equal under folding next to each other.
func compareFold(x, y []byte) int {
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		a, n := foldAt(x, i)
		b, m := foldAt(y, j)
		if a != b {
			return int(a) - int(b)
		}
		i += n
		j += m
	}
	switch {
	case i < len(x):
		return 1
	case j < len(y):
		return -1
	}
	return 0
}

// foldAt returns the folded rune at s[i] and its length in bytes.
func foldAt(s []byte, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		return rune(c), 1
	}
	r, n := utf8.DecodeRune(s[i:])
	return foldRune(r), n
}

// equalFoldName reports whether the path name s and the member name b are
// equal under case folding, as bytes.EqualFold would, without converting
// either.
func equalFoldName(s string, b []byte) bool {
	i, j := 0, 0
	for i < len(s) && j < len(b) {
		var x rune
		if c := s[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			x = rune(c)
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			x = foldRune(r)
			i += n
		}
		y, m := foldAt(b, j)
		if x != y {
			return false
		}
		j += m
	}
	return i == len(s) && j == len(b)
}

// foldRune returns the smallest rune of r's case-folding orbit, the same
// for every rune of it (as encoding/json folds names).
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

func ambiguousError(x, y []byte) error {
	return fmt.Errorf("%w: %q and %q differ only in case", ErrAmbiguousMember, x, y)
}
