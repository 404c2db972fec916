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
	in := p.in
	if j+1 >= len(in) {
		return j, errAt(ErrInvalidJSON, "unterminated string", j)
	}
	var c byte
	switch in[j+1] {
	case '"', '\\', '/':
		c = in[j+1]
	case 'b':
		c = '\b'
	case 'f':
		c = '\f'
	case 'n':
		c = '\n'
	case 'r':
		c = '\r'
	case 't':
		c = '\t'
	case 'u':
		return p.escapeU(j)
	default:
		return j, errAt(ErrInvalidString, "invalid escape", j)
	}
	p.dec = append(p.dec, c)
	return j + 2, nil
}

// escapeU decodes \uXXXX at in[j], joining a surrogate pair into one code
// point. A lone surrogate has no UTF-8 form, so it is an error (RFC 8785
// §3.2.2.2 requires one).
func (p *parser) escapeU(j int) (int, error) {
	r, ok := hex4(p.in, j+2)
	if !ok {
		return j, errAt(ErrInvalidString, "invalid \\u escape", j)
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return j, errAt(ErrInvalidString, "lone low surrogate", j)
	case r >= 0xD800 && r <= 0xDBFF:
		k := j + 6
		if k+1 >= len(p.in) || p.in[k] != '\\' || p.in[k+1] != 'u' {
			return j, errAt(ErrInvalidString, "lone high surrogate", j)
		}
		lo, ok := hex4(p.in, k+2)
		if !ok {
			return k, errAt(ErrInvalidString, "invalid \\u escape", k)
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return j, errAt(ErrInvalidString, "lone high surrogate", j)
		}
		r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
		p.dec = utf8.AppendRune(p.dec, r)
		return k + 6, nil
	}
	p.dec = utf8.AppendRune(p.dec, r)
	return j + 6, nil
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
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	k := 0
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[k:j]...)
		k = j + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
	}
	dst = append(dst, s[k:]...)
	return append(dst, '"')
}
