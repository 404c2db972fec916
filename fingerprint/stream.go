package fingerprint

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// MUST AGREE with the token parser. The stream writer is a second
// implementation of what tokens (canonical.go) does through the token tree
// (parse.go, then writeValue or filtered): for every input, reading mode,
// depth limit and "**.name" deny list, both write the same bytes, or fail
// with the same error, message and offset included. FuzzStream
// (stream_test.go) compares them on any input and runs under make test for
// a few seconds; TestStreamMatchesTokens and TestStreamShapesOutliveABody
// compare them on the seeds, on every prefix of a body and on generated
// trees. A change to one side alone fails them: change both, or neither.
//
// The stream writer is the fast path of canonical: it scans the body once
// and writes its canonical form as it goes, with no token tree and no second
// walk. A name that is not plain ASCII is scanned by the token parser's own
// functions (str, foldKey), and a number by its scanner (scanNumber);
// strings, plain names and the literals are scanned in the loop itself,
// checking and reporting as str and lit do, so that both accept, refuse and
// report exactly alike (the stream tests compare them). An object's members
// are written in the order they come, each one's span noted; when the object
// closes, its names are checked (duplicates, and names equal under case
// folding in foldNames mode) and, only if they were not in order already,
// its members are moved into order. It serves every body with no field list
// but "**.name" deny paths (the default deny-list is one), whose members it
// drops by name; other paths need the token tree (see filtered).

// stream parses in, read as m says, and appends its canonical form to
// w.out, leaving out every member whose name f.names holds when f is not
// nil. f must have no other paths. It follows parse step for step, so that
// its errors are parse's, in the same order.
func (w *work) stream(in []byte, maxDepth int, f *filter, m mode) error {
	w.p.reset(in, maxDepth, m)
	if w.shapeMode != m {
		// What a shape spares depends on m: the shapes of another
		// reading are forgotten.
		for i := range w.shapes {
			w.shapes[i].names = w.shapes[i].names[:0]
		}
		w.shapeMode = m
	}
	if cap(w.out)-len(w.out) < len(in) {
		w.out = growOut(w.out, len(in))
	}
	out, mems, err := w.streamValue(f)
	w.mems = mems[:0]
	if err != nil {
		return err
	}
	w.out = out
	return nil
}

// streamValue is stream's loop: it returns the output and the members
// slice, whose room the next call reuses.
//
// Most of a body is canonical as written: names and strings without
// escapes, integers, short decimals, the literals, the brackets and the
// commas. So the loop copies nothing token by token: the input from k to
// i is the pending run, canonical as written and not yet in out, and the
// output offset of in[i] is len(out)+i-k. The run is copied to out in one
// piece only where the output departs from the input (whitespace, an
// escape or a number written otherwise, a member dropped, an object put in
// order), and at the end.
//
// The loop is three sections, a member's name, a value and what follows a
// value, joined by goto: which one comes next is where the code goes, not
// a variable, and the few registers stay with the values that every token
// uses.
func (w *work) streamValue(f *filter) ([]byte, []keyRef, error) {
	p := &w.p
	in := p.in
	out := w.out
	mems := w.mems[:0]
	i := skipWS(in, 0)
	k := i
	cut := 0 // the output offset where the next member goes back to when it is dropped
	var num numLit
	var err error
	goto value

name:
	{
		if i >= len(in) || in[i] != '"' {
			if i >= len(in) {
				return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
			}
			return out, mems, errAt(ErrInvalidJSON, "expected a member name, found "+quoteByte(in[i]), i)
		}
		// The member's fields are kept apart and written in place:
		// a keyRef put together on the stack and then copied whole,
		// as append copies a composite literal, stalls on the store
		// forwarding of its parts.
		start := len(out) + i - k
		var pre uint64
		var flags uint8
		// A name of plain ASCII is canonical as written, and its
		// first eight bytes, read here, are its prefix.
		a, j := i+1, -1
		if a+8 <= len(in) {
			x := binary.LittleEndian.Uint64(in[a:])
			pre = bits.ReverseBytes64(x)
			var upper uint64
			for e := a; ; {
				if m := notPlain(x); m != 0 {
					b := bits.TrailingZeros64(m) >> 3
					if byte(x>>(8*b&63)) == '"' {
						j = e + b
						upper |= upperOrHigh(x) & (1<<(8*b&63) - 1)
						if e == a {
							pre &^= ^uint64(0) >> (8 * b & 63)
						}
					}
					break
				}
				upper |= upperOrHigh(x) // eight bytes of plain ASCII
				if e += 8; e+8 > len(in) {
					break
				}
				x = binary.LittleEndian.Uint64(in[e:])
			}
			if upper != 0 && p.mode&foldNames != 0 {
				flags = fFoldy
			}
		}
		var name []byte
		if j >= 0 {
			if flags != 0 {
				p.flagFoldy(fFoldy)
			}
			name = in[a:j]
			i = j + 1
		} else {
			var t tok
			if t, j, err = p.streamName(i); err != nil {
				return out, mems, err
			}
			a, flags = int(t.a), t.flags
			if t.flags&fDecoded != 0 {
				out = append(out, in[k:i]...)
				out = writeString(out, p, t)
				k = j
				name = p.dec[t.a:t.b]
				pre = namePrefix(p.dec, t.a, t.b)
			} else {
				name = in[t.a:t.b]
				pre = namePrefix(in, t.a, t.b)
			}
			i = j
		}
		if i >= len(in) || in[i] != ':' {
			if i < len(in) && space[in[i]] {
				out, i, k = spaceRun(out, in, i, k)
			}
			if i >= len(in) || in[i] != ':' {
				if i >= len(in) {
					return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
				}
				return out, mems, errAt(ErrInvalidJSON, "expected ':', found "+quoteByte(in[i]), i)
			}
		}
		i++
		drop := f != nil && f.names.mayHold(pre, len(name)) && f.names.has(name)
		if fr := &p.stack[len(p.stack)-1]; fr.sorted && len(mems) > int(fr.mark) {
			prev := &mems[len(mems)-1]
			if prev.pre > pre || prev.pre == pre && compareUTF16(p.refName(*prev), name) >= 0 {
				fr.sorted = false
			}
		}
		if len(mems) == cap(mems) {
			mems = slices.Grow(mems, 1)
		}
		mems = mems[:len(mems)+1]
		mm := &mems[len(mems)-1]
		mm.pre, mm.a, mm.b, mm.tok = pre, int32(a), int32(a+len(name)), 0
		mm.start, mm.end, mm.cut = int32(start), 0, int32(cut)
		mm.flags, mm.drop = flags, drop
		if i < len(in) && space[in[i]] {
			out, i, k = spaceRun(out, in, i, k)
		}
	}
value:
	{
		if i >= len(in) {
			return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		switch c := in[i]; c {
		case '{', '[':
			if len(p.stack) >= p.max {
				return out, mems, errAt(ErrTooDeep, "nesting deeper than the limit", i)
			}
			i++
			cut = len(out) + i - k
			if len(p.stack) == cap(p.stack) {
				p.stack = slices.Grow(p.stack, 1)
			}
			p.stack = p.stack[:len(p.stack)+1]
			fr := &p.stack[len(p.stack)-1]
			fr.tok, fr.mark, fr.out = 0, int32(len(mems)), int32(cut)
			fr.obj, fr.foldy, fr.sorted = c == '{', false, true
			if i < len(in) && space[in[i]] {
				out, i, k = spaceRun(out, in, i, k)
			}
			if i < len(in) && (in[i] == '}' && c == '{' || in[i] == ']' && c == '[') {
				i++
				p.stack = p.stack[:len(p.stack)-1]
				goto after
			}
			if c == '{' {
				goto name
			}
			goto value
		case '"':
			j := i + 1
			for { // skipPlain, inline
				if j+8 > len(in) {
					j = skipPlain(in, j)
					break
				}
				if m := notPlain(binary.LittleEndian.Uint64(in[j:])); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
					break
				}
				j += 8
			}
			if j >= len(in) || in[j] != '"' {
				if j, out, k, err = p.strRun(out, i, j, k); err != nil {
					return out, mems, err
				}
			}
			i = j + 1
		case 't':
			if len(in)-i < 4 || string(in[i:i+4]) != "true" {
				return out, mems, errAt(ErrInvalidJSON, "invalid literal", i)
			}
			i += 4
		case 'f':
			if len(in)-i < 5 || string(in[i:i+5]) != "false" {
				return out, mems, errAt(ErrInvalidJSON, "invalid literal", i)
			}
			i += 5
		case 'n':
			if len(in)-i < 4 || string(in[i:i+4]) != "null" {
				return out, mems, errAt(ErrInvalidJSON, "invalid literal", i)
			}
			i += 4
		default:
			if c != '-' && (c < '0' || c > '9') {
				return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
			// An integer of up to 15 digits but -0 is canonical as
			// written (see scanNumber), which finds the others.
			j := i
			if c == '-' {
				j++
			}
			d := j
			for j < len(in) && in[j]-'0' < 10 {
				j++
			}
			if j < len(in) && in[j] != '.' && in[j]|0x20 != 'e' && j > d && j-d <= 15 && (in[d] != '0' || j == d+1 && d == i) {
				i = j
				break
			}
			var written bool
			if written, err = scanNumber(in, i, &num); err != nil {
				return out, mems, err
			}
			if !written {
				out = append(out, in[k:i]...)
				if out, err = p.numberFrom(out, &num); err != nil {
					return out, mems, err
				}
				k = num.j
			}
			i = num.j
		}
	}
after:
	// A value ended: close containers until one expects another value.
	for {
		if d := len(p.stack); d > 0 && p.stack[d-1].obj {
			// The value of the object's last member.
			if mm := &mems[len(mems)-1]; mm.drop {
				if c := int(mm.cut); c < len(out) {
					out = out[:c]
				} else {
					out = append(out, in[k:k+c-len(out)]...)
				}
				k = i
			} else {
				mm.end = int32(len(out) + i - k)
			}
		}
		if i < len(in) && space[in[i]] {
			out, i, k = spaceRun(out, in, i, k)
		}
		if len(p.stack) == 0 {
			if i != len(in) {
				return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(in[i])+" after the top-level value", i)
			}
			return append(out, in[k:i]...), mems, nil
		}
		if i >= len(in) {
			return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		fr := &p.stack[len(p.stack)-1]
		switch c := in[i]; {
		case c == ',':
			if !fr.obj {
				i++
				if i < len(in) && space[in[i]] {
					out, i, k = spaceRun(out, in, i, k)
				}
				goto value
			}
			cut = len(out) + i - k
			if cut == int(fr.out) {
				// Every member so far was dropped: no comma.
				out = append(out, in[k:i]...)
				k = i + 1
			}
			i++
			if i < len(in) && space[in[i]] {
				out, i, k = spaceRun(out, in, i, k)
			}
			goto name
		case c == '}' && fr.obj:
			obj := *fr
			p.stack = p.stack[:len(p.stack)-1]
			if ms := mems[obj.mark:]; len(ms) > 1 && (!obj.sorted || obj.foldy) {
				if !obj.sorted {
					// The object is put in order in out.
					out = append(out, in[k:i]...)
					k = i
				}
				if out, err = w.closeObject(obj, ms, out); err != nil {
					return out, mems, err
				}
			}
			mems = mems[:obj.mark]
			i++
		case c == ']' && !fr.obj:
			p.stack = p.stack[:len(p.stack)-1]
			i++
		default:
			return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
		}
	}
}

// space marks the bytes of JSON whitespace.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// spaceRun ends streamValue's pending run in[k:i] at the whitespace at
// in[i], copying it to out, and starts the next after the whitespace.
func spaceRun(out, in []byte, i, k int) ([]byte, int, int) {
	out = append(out, in[k:i]...)
	i = skipWS(in, i)
	return out, i, i
}

// streamName scans the member name at in[i] that is not plain ASCII
// alone, as key does, and returns its token and where it ends.
func (p *parser) streamName(i int) (tok, int, error) {
	var err error
	if p.mode&foldNames != 0 {
		i, err = p.foldKey(i)
	} else {
		i, err = p.str(i, kKey)
	}
	if err != nil {
		return tok{}, i, err
	}
	t := p.toks[0]
	p.toks = p.toks[:0]
	return t, i, nil
}
