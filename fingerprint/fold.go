package fingerprint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
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

// nameClass returns fFoldy if name holds a byte that case folding may
// treat as equal to another byte sequence: an ASCII upper-case letter, or
// any byte of a multi-byte UTF-8 sequence (U+212A KELVIN SIGN folds to
// 'k', U+017F LONG S to 's'); and fWide too if it holds a non-ASCII byte.
// Two names that are not foldy (lower-case ASCII, digits, punctuation)
// are equal under folding only if they are equal, so an object none of
// whose names is foldy needs no check. foldKey finds the same while it
// scans a name; nameClass serves names that held escapes. It reads eight
// bytes at a time, the last word overlapping the one before; a shorter
// name is read as two overlapping halves.
func nameClass(name []byte) uint8 {
	n := len(name)
	var x, acc uint64 // every byte read; upperOrHigh of every word
	switch {
	case n >= 8:
		for i := 0; i+8 < n; i += 8 {
			y := binary.LittleEndian.Uint64(name[i:])
			acc |= upperOrHigh(y)
			x |= y
		}
		y := binary.LittleEndian.Uint64(name[n-8:])
		acc |= upperOrHigh(y)
		x |= y
	case n >= 4:
		x = uint64(binary.LittleEndian.Uint32(name)) | uint64(binary.LittleEndian.Uint32(name[n-4:]))<<32
		acc = upperOrHigh(x)
	case n >= 2:
		x = uint64(binary.LittleEndian.Uint16(name)) | uint64(binary.LittleEndian.Uint16(name[n-2:]))<<16
		acc = upperOrHigh(x)
	case n == 1:
		x = uint64(name[0])
		acc = upperOrHigh(x)
	}
	return classOf(acc, x)
}

func classOf(acc, x uint64) uint8 {
	var c uint8
	if acc != 0 {
		c = fFoldy
	}
	if x&hi8 != 0 {
		c |= fWide
	}
	return c
}

// keyClass classes the bytes of a member name for skipPlainKey: 0 for a
// byte that is not plain (see str.go), keyPlain for a plain one, and
// keyPlain|keyUpper for an upper-case ASCII letter.
var keyClass = func() (t [256]uint8) {
	for c := range t {
		if plain[c] {
			t[c] = keyPlain
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= keyUpper
	}
	return t
}()

const (
	keyPlain uint8 = 1 << iota
	keyUpper
)

// skipPlainKey is skipPlain for a member name: it also reports whether the
// bytes it skipped hold an upper-case letter, without stopping at one.
func skipPlainKey(in []byte, j int) (int, bool) {
	var upper uint64
	for j+8 <= len(in) {
		x := binary.LittleEndian.Uint64(in[j:])
		if m := notPlain(x); m != 0 {
			// The bytes below the first that is not plain are plain
			// ASCII, where upperOrHigh is exact.
			n := bits.TrailingZeros64(m) &^ 7
			upper |= upperOrHigh(x) & (1<<n - 1)
			return j + n/8, upper != 0
		}
		upper |= upperOrHigh(x) // all eight bytes are plain ASCII here
		j += 8
	}
	var c uint8
	for j < len(in) {
		k := keyClass[in[j]]
		if k == 0 {
			break
		}
		c |= k
		j++
	}
	return j, upper != 0 || c&keyUpper != 0
}

// foldKey is str for a member name in foldNames mode: it also flags a name
// that nameClass would call foldy or wide, and the object it is in, while
// it scans, so that a name of lower-case ASCII costs nothing more.
func (p *parser) foldKey(i int) (int, error) {
	in := p.in
	start := i + 1
	j := start
	var flags uint8
	for {
		var upper bool
		if j, upper = skipPlainKey(in, j); upper {
			flags |= fFoldy
		}
		if j >= len(in) {
			return j, errAt(ErrInvalidJSON, "unterminated string", i)
		}
		switch c := in[j]; {
		case c == '"':
			p.toks = append(p.toks, tok{kind: kKey, flags: flags, a: int32(start), b: int32(j)})
			p.flagFoldy(flags)
			return j + 1, nil
		case c == '\\':
			// Rare: decode the name, then look at what it decodes to.
			j, err := p.decode(i, j, kKey)
			if err != nil {
				return j, err
			}
			t := &p.toks[len(p.toks)-1]
			t.flags |= nameClass(p.dec[t.a:t.b])
			p.flagFoldy(t.flags)
			return j, nil
		case c < 0x20:
			return j, errAt(ErrInvalidString, "raw control character", j)
		default:
			r, size := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && size == 1 {
				return j, errAt(ErrInvalidString, "invalid UTF-8", j)
			}
			flags |= fFoldy | fWide
			j += size
		}
	}
}

// flagFoldy marks the open object as needing checkFold when a name's flags
// say it is foldy.
func (p *parser) flagFoldy(flags uint8) {
	if flags&fFoldy != 0 {
		p.stack[len(p.stack)-1].foldy = true
	}
}

const lo8, hi8 = 0x0101010101010101, 0x8080808080808080

// upperOrHigh is not zero exactly when a byte of x is an ASCII upper-case
// letter or 0x80 and above. For an ASCII byte c, c+0x3f has its top bit
// set from 'A' on and c+0x25 from '[' on, and neither sum carries into the
// next byte; a byte of 0x80 and above, whose sums may carry, sets its own
// top bit.
func upperOrHigh(x uint64) uint64 {
	return ((x+0x3f*lo8)&^(x+0x25*lo8) | x) & hi8
}

// foldSmall is the largest object whose names are compared pair by pair;
// larger ones are sorted by their folded form.
const foldSmall = 16

// checkFold reports two names of the object just sorted into p.refs that
// differ but are equal under case folding, for an object with a foldy
// name. Exact duplicates were reported already.
func (p *parser) checkFold() error {
	refs := p.refs
	if len(refs) > foldSmall {
		return p.checkFoldSorted()
	}
	// Two ASCII names equal under folding have the same length and the
	// same first letter but for case: only names with the same signature
	// are compared, and a name with a non-ASCII byte (rare) with every
	// other.
	var sig [foldSmall]uint32
	var wide uint32
	for i, r := range refs {
		buf := p.in
		if r.flags&fDecoded != 0 {
			buf = p.dec
		}
		if r.b > r.a {
			sig[i] = uint32(r.b-r.a)<<8 | uint32(upperASCII(buf[r.a]))
		}
		if r.flags&fWide != 0 {
			wide |= 1 << i
		}
	}
	for i := range refs {
		for j := i + 1; j < len(refs); j++ {
			if sig[i] != sig[j] && (wide>>i|wide>>j)&1 == 0 {
				continue
			}
			if x, y := p.refName(refs[i]), p.refName(refs[j]); bytes.EqualFold(x, y) {
				return ambiguousError(x, y)
			}
		}
	}
	return nil
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		c -= 'a' - 'A'
	}
	return c
}

// checkFoldSorted is checkFold for a large object: its names, sorted by
// their folded form, are equal under folding only as neighbours.
func (p *parser) checkFoldSorted() error {
	fs := append(p.fold[:0], p.refs...)
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
