package fingerprint

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// plain marks the bytes a JSON string may hold as they are, and that RFC
// 8785 writes as they are: printable ASCII except '"' and '\'. Bytes of 0x80
// and above need a UTF-8 check; control characters are invalid raw.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain returns the index of the first byte from j on that is not plain,
// eight bytes at a time while it can.
func skipPlain(in []byte, j int) int {
	for j+8 <= len(in) {
		if m := notPlain(binary.LittleEndian.Uint64(in[j:])); m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
		j += 8
	}
	for j < len(in) && plain[in[j]] {
		j++
	}
	return j
}

// notPlain returns the top bit of every byte of x (little-endian: the first
// byte lowest) that may not be plain: 0x80 and above, below 0x20, '"' or
// '\'. A borrow runs only upwards from a byte that is truly not plain, so
// the lowest bit set marks the first byte that is not plain, exactly.
func notPlain(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ lo*'"'
	b := x ^ lo*'\\'
	return (x | (x-lo*0x20)&^x | (q-lo)&^q | (b-lo)&^b) & hi
}

// str scans the string starting at the quote in[i] and appends its token.
// A string without escapes stays a span of the input, already in canonical
// form; one with escapes is decoded into p.dec.
func (p *parser) str(i int, kind uint8) (int, error) {
	in := p.in
	start := i + 1
	j := start
	for {
		j = skipPlain(in, j)
		if j >= len(in) {
			return j, errAt(ErrInvalidJSON, "unterminated string", i)
		}
		c := in[j]
		switch {
		case c == '"':
			p.toks = append(p.toks, tok{kind: kind, a: int32(start), b: int32(j)})
			return j + 1, nil
		case c == '\\':
			return p.decode(i, j, kind)
		case c < 0x20:
			return j, errAt(ErrInvalidString, "raw control character", j)
		default:
			r, size := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && size == 1 {
				return j, errAt(ErrInvalidString, "invalid UTF-8", j)
			}
			j += size
		}
	}
}

// decode finishes a string whose first escape is at in[j], writing its
// unescaped UTF-8 into p.dec.
func (p *parser) decode(i, j int, kind uint8) (int, error) {
	in := p.in
	d0 := len(p.dec)
	p.dec = append(p.dec, in[i+1:j]...)
	for {
		k := j
		j = skipPlain(in, j)
		p.dec = append(p.dec, in[k:j]...)
		if j >= len(in) {
			return j, errAt(ErrInvalidJSON, "unterminated string", i)
		}
		c := in[j]
		switch {
		case c == '"':
			p.toks = append(p.toks, tok{kind: kind, flags: fDecoded, a: int32(d0), b: int32(len(p.dec))})
			return j + 1, nil
		case c == '\\':
			var err error
			if j, err = p.escape(j); err != nil {
				return j, err
			}
		case c < 0x20:
			return j, errAt(ErrInvalidString, "raw control character", j)
		default:
			r, size := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && size == 1 {
				return j, errAt(ErrInvalidString, "invalid UTF-8", j)
			}
			p.dec = append(p.dec, in[j:j+size]...)
			j += size
		}
	}
}

// escape decodes the escape sequence at in[j] (a backslash) into p.dec.
func (p *parser) escape(j int) (int, error) {
	r, k, err := escapedRune(p.in, j)
	if err != nil {
		return k, err
	}
	p.dec = utf8.AppendRune(p.dec, r)
	return k, nil
}

// escapedRune decodes the escape sequence at in[j] (a backslash): the
// code point it stands for and where it ends. \uXXXX joins a surrogate
// pair into one code point. A lone surrogate has no UTF-8 form, so it is an
// error (RFC 8785 §3.2.2.2 requires one).
func escapedRune(in []byte, j int) (rune, int, error) {
	if j+1 >= len(in) {
		return 0, j, errAt(ErrInvalidJSON, "unterminated string", j)
	}
	switch in[j+1] {
	case '"', '\\', '/':
		return rune(in[j+1]), j + 2, nil
	case 'b':
		return '\b', j + 2, nil
	case 'f':
		return '\f', j + 2, nil
	case 'n':
		return '\n', j + 2, nil
	case 'r':
		return '\r', j + 2, nil
	case 't':
		return '\t', j + 2, nil
	case 'u':
	default:
		return 0, j, errAt(ErrInvalidString, "invalid escape", j)
	}
	r, ok := hex4(in, j+2)
	if !ok {
		return 0, j, errAt(ErrInvalidString, "invalid \\u escape", j)
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, j, errAt(ErrInvalidString, "lone low surrogate", j)
	case r >= 0xD800 && r <= 0xDBFF:
		k := j + 6
		if k+1 >= len(in) || in[k] != '\\' || in[k+1] != 'u' {
			return 0, j, errAt(ErrInvalidString, "lone high surrogate", j)
		}
		lo, ok := hex4(in, k+2)
		if !ok {
			return 0, k, errAt(ErrInvalidString, "invalid \\u escape", k)
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, j, errAt(ErrInvalidString, "lone high surrogate", j)
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), k + 6, nil
	}
	return r, j + 6, nil
}

// strRun is str for the stream writer, which keeps in its pending run
// what RFC 8785 writes as it is (see streamValue): it scans on from in[j],
// the first byte that is not plain of the string at in[i], and returns
// where the string ends, out and the start k of the run. Valid UTF-8 and
// the escapes RFC 8785 writes alike (\" \\ \b \f \n \r \t) stay in the
// run; another escape (\/ or \u) ends it: the run goes to out, then the
// escape's canonical form (appendRune), and a new run starts after it. It
// checks and fails exactly as str does.
func (p *parser) strRun(out []byte, i, j, k int) (int, []byte, int, error) {
	in := p.in
	for {
		if j >= len(in) {
			return j, out, k, errAt(ErrInvalidJSON, "unterminated string", i)
		}
		switch c := in[j]; {
		case c == '"':
			return j, out, k, nil
		case c == '\\':
			if j+1 < len(in) && sameEscape[in[j+1]] {
				j += 2
				break
			}
			r, e, err := escapedRune(in, j)
			if err != nil {
				return e, out, k, err
			}
			out = append(out, in[k:j]...)
			out = appendRune(out, r)
			j, k = e, e
		case c < 0x20:
			return j, out, k, errAt(ErrInvalidString, "raw control character", j)
		default:
			size := utf8Len(in, j)
			if size == 0 {
				return j, out, k, errAt(ErrInvalidString, "invalid UTF-8", j)
			}
			j += size
		}
		j = skipPlain(in, j)
	}
}

// sameEscape marks the bytes after a backslash of the escapes RFC 8785
// writes as they are written.
var sameEscape = [256]bool{'"': true, '\\': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// utf8Len returns the length of the valid UTF-8 sequence at in[j], a byte
// of 0x80 or above, or 0 when it is not one, as utf8.DecodeRune finds it.
// Two- and three-byte sequences, the common ones, are checked here.
func utf8Len(in []byte, j int) int {
	switch c := in[j]; {
	case c >= 0xC2 && c < 0xE0:
		if j+1 < len(in) && in[j+1]&0xC0 == 0x80 {
			return 2
		}
		return 0
	case c >= 0xE0 && c < 0xF0 && j+2 < len(in):
		lo, hi := byte(0x80), byte(0xBF)
		switch c {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F // not a surrogate
		}
		if c1 := in[j+1]; c1 >= lo && c1 <= hi && in[j+2]&0xC0 == 0x80 {
			return 3
		}
		return 0
	}
	if r, size := utf8.DecodeRune(in[j:]); r != utf8.RuneError || size > 1 {
		return size
	}
	return 0
}

// appendRune appends r as appendQuoted writes it inside a string.
func appendRune(dst []byte, r rune) []byte {
	if r >= 0x20 && r != '"' && r != '\\' {
		return utf8.AppendRune(dst, r)
	}
	return appendEscape(dst, byte(r))
}

// appendEscape appends the RFC 8785 escape of c, which is '"', '\\' or a
// control character.
func appendEscape(dst []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
}

func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendQuoted writes the valid UTF-8 string s as RFC 8785 §3.2.2.2 wants:
// '"' and '\' escaped, the control characters U+0000..U+001F as \b \t \n
// \f \r or \u00xx (lower-case hex), everything else as it is.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	k := 0
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[k:j]...)
		k = j + 1
		dst = appendEscape(dst, c)
	}
	dst = append(dst, s[k:]...)
	return append(dst, '"')
}
