package fingerprint

import (
	"math"
	"strconv"
)

// number scans the number at in[i] (RFC 8259 grammar). An integer of at most
// 15 digits (other than -0) is exact in a double and already in its ES6
// form, so it stays a span of the input; any other number is converted once,
// here, so that a value out of range is found even where a deny-list later
// drops it.
func (p *parser) number(i int) (int, error) {
	in := p.in
	j := i
	if in[j] == '-' {
		j++
	}
	d := j
	switch {
	case j < len(in) && in[j] == '0':
		j++
	case j < len(in) && in[j] >= '1' && in[j] <= '9':
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
	default:
		return j, errAt(ErrInvalidJSON, "invalid number", i)
	}
	canon := j-d <= 15 && !(in[d] == '0' && d > i)
	if j < len(in) && in[j] == '.' {
		canon = false
		j++
		k := j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		if j == k {
			return j, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	if j < len(in) && (in[j] == 'e' || in[j] == 'E') {
		canon = false
		j++
		if j < len(in) && (in[j] == '+' || in[j] == '-') {
			j++
		}
		k := j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		if j == k {
			return j, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	if canon {
		p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
		return j, nil
	}
	f, err := strconv.ParseFloat(string(in[i:j]), 64)
	if err != nil || math.IsInf(f, 0) {
		return i, errAt(ErrNumberRange, "number beyond the range of a double", i)
	}
	p.toks = append(p.toks, tok{kind: kNumber, flags: fFloat, a: int32(len(p.nums))})
	p.nums = append(p.nums, f)
	return j, nil
}

// appendES6 writes f as ECMAScript's Number.prototype.toString does (ECMA-262
// Number::toString, radix 10), which RFC 8785 §3.2.2.3 requires: the
// shortest digits that read back as f, then plain notation for exponents
// from -7 to 20 and exponent notation outside it. f must be finite; -0 is
// written as 0.
func appendES6(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits in the form d.ddddde±xx.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	x := 0
	for x < len(e) && e[x] != 'e' {
		if e[x] != '.' {
			digits[k] = e[x]
			k++
		}
		x++
	}
	exp := 0
	neg := e[x+1] == '-'
	for _, c := range e[x+2:] {
		exp = exp*10 + int(c-'0')
	}
	if neg {
		exp = -exp
	}
	// ECMA-262 names the digits s (k of them) and the exponent n, with the
	// value s × 10^(n-k).
	n := exp + 1
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst
}
