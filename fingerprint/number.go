package fingerprint

import (
	"math"
	"strconv"
)

// numLit is the anatomy of the number literal in[i:j]: its digits from d
// (after a '-'), its integer part up to ie, its fraction in[fs:fe] (empty
// when it has none) and its exponent in[ep:ee] from the 'e' on (empty when
// it has none).
type numLit struct {
	i, d, ie, fs, fe, ep, ee, j int
}

// scanNumber scans the number at in[i] (RFC 8259 grammar) into n, which it
// fills in place: a numLit returned by value costs a copy that shows. It
// reports whether the literal is already in its ES6 form, as most numbers
// are, never meeting a float conversion: an integer of at most 15 digits
// (other than -0), or a decimal without an exponent whose fraction does
// not end in 0 and that plainDecimal accepts. (In exactInts mode every
// integer other than -0 counts as written too, once exactInt has checked
// it.)
func scanNumber(in []byte, i int, n *numLit) (bool, error) {
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
		n.j = j
		return false, errAt(ErrInvalidJSON, "invalid number", i)
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
			n.j = j
			return false, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	ep, ee := j, j
	if j < len(in) && (in[j] == 'e' || in[j] == 'E') {
		ep = j
		j++
		if j < len(in) && (in[j] == '+' || in[j] == '-') {
			j++
		}
		es := j
		for j < len(in) && in[j] >= '0' && in[j] <= '9' {
			j++
		}
		ee = j
		if ee == es {
			n.j = j
			return false, errAt(ErrInvalidJSON, "invalid number", i)
		}
	}
	n.i, n.d, n.ie, n.fs, n.fe, n.ep, n.ee, n.j = i, d, ie, fs, fe, ep, ee, j
	if ie == j {
		return ie-d <= 15 && !(in[d] == '0' && d > i), nil
	}
	return ep == j && in[fe-1] != '0' && plainDecimal(in[d:ie], in[fs:fe]), nil
}

// number scans the number at in[i] and appends its token. A number in its
// canonical form as written (see scanNumber, exactInt) stays a span of the
// input; any other literal with at most 15 significant digits and a
// moderate exponent is rewritten textually (see shortDecimal) into p.dec.
// The rest is converted once, here, so that a value out of range is found
// even where a deny-list later drops it.
func (p *parser) number(i int) (int, error) {
	in := p.in
	var n numLit
	written, err := scanNumber(in, i, &n)
	if err != nil {
		return n.j, err
	}
	j := n.j
	if written {
		p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
		return j, nil
	}
	if n.ie == j && in[n.d] != '0' && p.mode&exactInts != 0 {
		if err := exactInt(in[i:j]); err != nil {
			return i, errAt(err, "number beyond the range of a double", i)
		}
		p.toks = append(p.toks, tok{kind: kNumber, a: int32(i), b: int32(j)})
		return j, nil
	}
	if d0 := len(p.dec); d0 <= maxRewritten {
		// Token offsets are 32-bit; past maxRewritten, numbers take the
		// float path.
		if dec, ok := shortDecimal(p.dec, &n, in); ok {
			p.dec = dec
			p.toks = append(p.toks, tok{kind: kNumber, flags: fDecoded, a: int32(d0), b: int32(len(p.dec))})
			return j, nil
		}
	}
	f, err := parseNumber(in[i:j])
	if err != nil {
		return i, errAt(err, "number beyond the range of a double", i)
	}
	p.toks = append(p.toks, tok{kind: kNumber, flags: fFloat, a: int32(len(p.nums))})
	p.nums = append(p.nums, f)
	return j, nil
}

// numberFrom is number for the stream writer: it appends to dst the
// canonical form of the literal n, scanned and not in that form as
// written, through the same decisions.
func (p *parser) numberFrom(dst []byte, n *numLit) ([]byte, error) {
	in := p.in
	i, j := n.i, n.j
	if n.ie == j && in[n.d] != '0' && p.mode&exactInts != 0 {
		if err := exactInt(in[i:j]); err != nil {
			return dst, errAt(err, "number beyond the range of a double", i)
		}
		return append(dst, in[i:j]...), nil
	}
	if out, ok := shortDecimal(dst, n, in); ok {
		return out, nil
	}
	f, err := parseNumber(in[i:j])
	if err != nil {
		return dst, errAt(err, "number beyond the range of a double", i)
	}
	return appendES6(dst, f), nil
}

// parseNumber converts a number literal to the nearest double, or fails
// with ErrNumberRange when it is beyond the range of one.
func parseNumber(lit []byte) (float64, error) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, ErrNumberRange
	}
	return f, nil
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

// exactInt checks the integer literal lit, which counts as written: its
// digits are its exact value, which is how encoding/json decodes it into an
// int64 or a uint64. Up to 2^53 that is also the ES6 form of its double,
// so only larger integers come out differently from RFC 8785. The literal
// must still fit a double, as every number must: one of more than 308
// digits is checked against that range like any other number, and fails
// with ErrNumberRange.
func exactInt(lit []byte) error {
	d := lit
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) > 308 {
		if _, err := parseNumber(lit); err != nil {
			return err
		}
	}
	return nil
}

// maxRewritten bounds p.dec for rewritten numbers. A number's ES6 form can
// be five times its literal ("1e20"), and decoded strings never grow, so
// with it p.dec stays below HardMaxBytes + maxRewritten + 32, inside the
// 32-bit offsets of a token.
const maxRewritten = 512 << 20

// shortDecimal appends the ES6 form of the number literal lit in in to dst
// without a float conversion, when it can.
//
// A decimal of at most 15 significant digits (DBL_DIG) survives the trip to
// the nearest double and back, and no other decimal of at most 15 digits
// reaches the same double, so its digits, without leading and trailing
// zeros, are the shortest round-trip digits ES6 wants. The exponent is kept
// well inside the normal range, where that guarantee holds.
func shortDecimal(dst []byte, lit *numLit, in []byte) ([]byte, bool) {
	e := 0
	if x := lit.ep + 1; x < lit.ee {
		neg := in[x] == '-'
		if neg || in[x] == '+' {
			x++
		}
		if lit.ee-x > 4 {
			return dst, false
		}
		for ; x < lit.ee; x++ {
			e = e*10 + int(in[x]-'0')
		}
		if neg {
			e = -e
		}
	}
	// The value is the digits of intPart and frac × 10^(e - len(frac)),
	// and stays so as leading zeros go and trailing zeros move into n.
	intPart, frac := in[lit.d:lit.ie], in[lit.fs:lit.fe]
	n := e - len(frac)
	if intPart[0] == '0' { // "0", as the grammar allows no other leading zero
		intPart = nil
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
		}
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
		n++
	}
	if len(frac) == 0 {
		for len(intPart) > 0 && intPart[len(intPart)-1] == '0' {
			intPart = intPart[:len(intPart)-1]
			n++
		}
	}
	k := len(intPart) + len(frac)
	if k == 0 {
		return append(dst, '0'), true
	}
	if k > 15 {
		return dst, false
	}
	// ECMA-262 calls the digit count k and the decimal exponent n,
	// value = s × 10^(n-k).
	n += k
	if n < -290 || n > 290 {
		return dst, false
	}
	ds := intPart
	switch {
	case len(frac) == 0:
	case len(intPart) == 0:
		ds = frac
	default:
		var buf [15]byte
		m := copy(buf[:], intPart)
		copy(buf[m:], frac)
		ds = buf[:k]
	}
	return appendDigits(dst, lit.d > lit.i, ds, n), true
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
