package fingerprint

import (
	"math"
	"strconv"
)

// number scans the number at in[i] (RFC 8259 grammar) and appends its token.
// Most numbers never meet a float conversion: an integer of at most 15
// digits (other than -0) is already in its ES6 form and stays a span of the
// input, as does every integer (other than -0) in exactInts mode; any other
// literal with at most 15 significant digits and a moderate exponent is
// rewritten textually (see shortDecimal). The rest is converted once, here,
// so that a value out of range is found even where a deny-list later drops
// it.
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
	ie := j
	fs, fe := j, j
	if j < len(in) && in[j] == '.' {
		j++
		fs = j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		fe = j
		if fe == fs {
			return j, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	ep, es, ee := j, j, j
	if j < len(in) && (in[j] == 'e' || in[j] == 'E') {
		ep = j
		j++
		if j < len(in) && (in[j] == '+' || in[j] == '-') {
			j++
		}
		es = j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		ee = j
		if ee == es {
			return j, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	if ie == j && ie-d <= 15 && !(in[d] == '0' && d > i) {
		p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
		return j, nil
	}
	if ep == j && fe > fs && in[fe-1] != '0' && plainDecimal(in[d:ie], in[fs:fe]) {
		p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
		return j, nil
	}
	if ie == j && in[d] != '0' && p.mode&exactInts != 0 {
		return p.exactInt(i, j)
	}
	if d0, ok := p.shortDecimal(d > i, in[d:ie], in[fs:fe], in[ep:ee]); ok {
		p.toks = append(p.toks, tok{kind: kNumber, flags: fDecoded, a: int32(d0), b: int32(len(p.dec))})
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

// plainDecimal reports whether a number with the integer digits intPart
// and the fraction digits frac, no exponent and a fraction that does not
// end in 0, is already in its ES6 form as written: at most 15 significant
// digits (see shortDecimal), so its digits are its shortest round-trip
// digits, and either an integer part other than 0, or 0 and at most five
// zeros after the point, where ES6 still writes plain notation (0.000001,
// but 1e-7).
func plainDecimal(intPart, frac []byte) bool {
	if intPart[0] != '0' {
		return len(intPart)+len(frac) <= 15
	}
	z := 0
	for z < len(frac) && frac[z] == '0' {
		z++
	}
	return z <= 5 && len(frac)-z <= 15
}

// exactInt appends the integer literal in[i:j] as written: its digits are
// its exact value, which is how encoding/json decodes it into an int64 or a
// uint64. Up to 2^53 that is also the ES6 form of its double, so only
// larger integers come out differently from RFC 8785. The literal must
// still fit a double, as every number must: one of more than 308 digits is
// checked against that range like any other number.
func (p *parser) exactInt(i, j int) (int, error) {
	d := i
	if p.in[d] == '-' {
		d++
	}
	if j-d > 308 {
		if f, err := strconv.ParseFloat(string(p.in[i:j]), 64); err != nil || math.IsInf(f, 0) {
			return i, errAt(ErrNumberRange, "number beyond the range of a double", i)
		}
	}
	p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
	return j, nil
}

// maxRewritten bounds p.dec for rewritten numbers. A number's ES6 form can
// be five times its literal ("1e20"), and decoded strings never grow, so
// with it p.dec stays below HardMaxBytes + maxRewritten + 32, inside the
// 32-bit offsets of a token.
const maxRewritten = 512 << 20

// shortDecimal writes the ES6 form of a number literal to p.dec without a
// float conversion, when it can: intPart and frac are its digits, exp its
// exponent from its 'e' on (empty when there is none).
//
// A decimal of at most 15 significant digits (DBL_DIG) survives the trip to
// the nearest double and back, and no other decimal of at most 15 digits
// reaches the same double, so its digits, without leading and trailing
// zeros, are the shortest round-trip digits ES6 wants. The exponent is kept
// well inside the normal range, where that guarantee holds.
func (p *parser) shortDecimal(neg bool, intPart, frac, exp []byte) (int, bool) {
	var buf [15]byte
	k, zeros := 0, 0
	started := false
	for _, part := range [2][]byte{intPart, frac} {
		for _, c := range part {
			switch {
			case c == '0' && !started:
			case c == '0':
				zeros++
			default:
				started = true
				if k+zeros >= len(buf) {
					return 0, false
				}
				for ; zeros > 0; zeros-- {
					buf[k] = '0'
					k++
				}
				buf[k] = c
				k++
			}
		}
	}
	e := 0
	if len(exp) > 0 {
		digits := exp[1:]
		sign := 1
		if exp[1] == '-' || exp[1] == '+' {
			digits = exp[2:]
			if exp[1] == '-' {
				sign = -1
			}
		}
		if len(digits) > 4 {
			return 0, false
		}
		for _, c := range digits {
			e = e*10 + int(c-'0')
		}
		e *= sign
	}
	d0 := len(p.dec)
	if d0 > maxRewritten {
		// Token offsets are 32-bit; past this, numbers take the float path.
		return 0, false
	}
	if k == 0 {
		p.dec = append(p.dec, '0')
		return d0, true
	}
	// The value is buf[:k] × 10^(zeros + e - len(frac)); ECMA-262 calls
	// the digit count k and the decimal exponent n, value = s × 10^(n-k).
	n := k + zeros + e - len(frac)
	if n < -290 || n > 290 {
		return 0, false
	}
	p.dec = appendDigits(p.dec, neg, buf[:k], n)
	return d0, true
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
	return appendDigits(dst, false, digits[:k], exp+1)
}

// appendDigits lays out the shortest digits ds of a non-zero number and its
// decimal exponent n (value = 0.ds × 10^n) as ECMA-262 Number::toString
// does: plain notation when -6 < n <= 21, exponent notation outside.
func appendDigits(dst []byte, neg bool, ds []byte, n int) []byte {
	if neg {
		dst = append(dst, '-')
	}
	k := len(ds)
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
