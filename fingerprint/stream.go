package fingerprint

import "slices"

// The stream writer is the fast path of canonical: it scans the body once
// and writes its canonical form as it goes, with no token tree and no
// second walk. Scalars are checked and written by the same scanning
// functions as the token parser (str, foldKey, number, lit), so that both
// accept, refuse and report exactly alike. An object's members are written
// in the order they come, each one's span noted; when the object closes,
// its names are checked (duplicates, and names equal under case folding in
// foldNames mode) and, only if they were not in order already, its members
// are moved into order. It serves every body with no field list but
// "**.name" deny paths (the default deny-list is one), whose members it
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
	out, mems, err := w.streamValue(f != nil && f.names.n > 0, f)
	w.mems = mems[:0]
	if err != nil {
		return err
	}
	w.out = out
	return nil
}

// streamValue is stream's loop: it returns the output and the members
// slice, whose room the next call reuses.
func (w *work) streamValue(deny bool, f *filter) ([]byte, []keyRef, error) {
	p := &w.p
	in := p.in
	out := w.out
	mems := w.mems[:0]
	n := len(in)
	i := 0
	var err error
value:
	for {
		i = skipWS(in, i)
		if i >= n {
			return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		switch c := in[i]; c {
		case '{', '[':
			if len(p.stack) >= p.max {
				return out, mems, errAt(ErrTooDeep, "nesting deeper than the limit", i)
			}
			out = append(out, c)
			p.stack = append(p.stack, frame{mark: int32(len(mems)), obj: c == '{', out: int32(len(out)), sorted: true})
			i = skipWS(in, i+1)
			if i < n && (in[i] == '}' && c == '{' || in[i] == ']' && c == '[') {
				i++
				p.stack = p.stack[:len(p.stack)-1]
				out = append(out, in[i-1])
				break // to the closing loop below
			}
			if c == '{' {
				if i, out, mems, err = w.streamKey(i, out, mems, f, deny); err != nil {
					return out, mems, err
				}
			}
			continue value
		case '"':
			if j := skipPlain(in, i+1); j < n && in[j] == '"' {
				// Printable ASCII alone: canonical as written.
				out = append(out, in[i:j+1]...)
				i = j + 1
				break
			}
			if i, out, err = p.strTo(out, i); err != nil {
				return out, mems, err
			}
		case 't':
			if i, err = p.lit(i, "true", kTrue); err != nil {
				return out, mems, err
			}
			out = append(out, "true"...)
			p.toks = p.toks[:0]
		case 'f':
			if i, err = p.lit(i, "false", kFalse); err != nil {
				return out, mems, err
			}
			out = append(out, "false"...)
			p.toks = p.toks[:0]
		case 'n':
			if i, err = p.lit(i, "null", kNull); err != nil {
				return out, mems, err
			}
			out = append(out, "null"...)
			p.toks = p.toks[:0]
		default:
			if c != '-' && (c < '0' || c > '9') {
				return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
			if i, out, err = p.numberTo(out, i); err != nil {
				return out, mems, err
			}
		}
		// A value ended: close containers until one expects another value.
		for {
			if k := len(p.stack); k > 0 && p.stack[k-1].obj {
				// The value of the object's last member.
				if mm := &mems[len(mems)-1]; mm.drop {
					out = out[:mm.cut]
				} else {
					mm.end = int32(len(out))
				}
			}
			i = skipWS(in, i)
			if len(p.stack) == 0 {
				if i != n {
					return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(in[i])+" after the top-level value", i)
				}
				return out, mems, nil
			}
			if i >= n {
				return out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
			}
			obj := p.stack[len(p.stack)-1].obj
			switch c := in[i]; {
			case c == ',':
				i++
				if obj {
					if i, out, mems, err = w.streamKey(skipWS(in, i), out, mems, f, deny); err != nil {
						return out, mems, err
					}
				} else {
					out = append(out, ',')
				}
				continue value
			case c == '}' && obj:
				i++
				fr := p.stack[len(p.stack)-1]
				p.stack = p.stack[:len(p.stack)-1]
				if out, err = w.closeObject(fr, mems[fr.mark:], out); err != nil {
					return out, mems, err
				}
				mems = mems[:fr.mark]
				out = append(out, '}')
			case c == ']' && !obj:
				i++
				p.stack = p.stack[:len(p.stack)-1]
				out = append(out, ']')
			default:
				return out, mems, errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
		}
	}
}

// streamKey is key for the stream writer: it scans the member name at
// in[i] and the colon after it, notes the member and writes its name.
func (w *work) streamKey(i int, out []byte, mems []keyRef, f *filter, deny bool) (int, []byte, []keyRef, error) {
	p := &w.p
	in := p.in
	if i >= len(in) || in[i] != '"' {
		if i >= len(in) {
			return i, out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, out, mems, errAt(ErrInvalidJSON, "expected a member name, found "+quoteByte(in[i]), i)
	}
	var t tok
	if j, upper := skipPlainKey(in, i+1); j < len(in) && in[j] == '"' {
		// Printable ASCII alone, as foldKey and str would find it.
		t = tok{kind: kKey, a: int32(i + 1), b: int32(j)}
		if upper && p.mode&foldNames != 0 {
			t.flags = fFoldy
			p.flagFoldy(fFoldy)
		}
		i = j + 1
	} else {
		var err error
		if p.mode&foldNames != 0 {
			i, err = p.foldKey(i)
		} else {
			i, err = p.str(i, kKey)
		}
		if err != nil {
			return i, out, mems, err
		}
		t = p.toks[0]
		p.toks = p.toks[:0]
	}
	i = skipWS(in, i)
	if i >= len(in) || in[i] != ':' {
		if i >= len(in) {
			return i, out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, out, mems, errAt(ErrInvalidJSON, "expected ':', found "+quoteByte(in[i]), i)
	}
	fr := &p.stack[len(p.stack)-1]
	mm := keyRef{a: t.a, b: t.b, flags: t.flags, cut: int32(len(out))}
	if len(out) > int(fr.out) {
		out = append(out, ',')
	}
	mm.start = int32(len(out))
	buf := in
	if t.flags&fDecoded != 0 {
		buf = p.dec
	}
	mm.pre = namePrefix(buf, t.a, t.b)
	if deny && f.denied(buf[t.a:t.b]) {
		mm.drop = true
	}
	if fr.sorted && len(mems) > int(fr.mark) {
		prev := &mems[len(mems)-1]
		c := comparePrefix(prev.pre, mm.pre)
		if c == 0 {
			c = compareUTF16(p.refName(*prev), buf[t.a:t.b])
		}
		if c >= 0 {
			fr.sorted = false
		}
	}
	mems = append(mems, mm)
	if t.flags&fDecoded == 0 && i == int(t.b)+1 {
		// The name as written, its quotes and the colon after it.
		out = append(out, in[t.a-1:i+1]...)
	} else {
		out = writeString(out, p, t)
		out = append(out, ':')
	}
	return i + 1, out, mems, nil
}

// closeObject checks the names of the object fr that has just closed, whose
// members are ms, as close does, and puts its members in order when they
// were not.
func (w *work) closeObject(fr frame, ms []keyRef, out []byte) ([]byte, error) {
	if len(ms) < 2 || fr.sorted && !fr.foldy {
		return out, nil
	}
	p := &w.p
	if fr.sorted {
		return out, p.checkFoldOf(ms)
	}
	sh := &w.shapes[shapeSlot(len(p.stack), ms)]
	if !sh.same(p, ms) {
		if err := w.sortNames(ms, fr.foldy); err != nil {
			return out, err
		}
		sh.remember(p, ms, w.keys)
	}
	w.perm = append(w.perm[:0], out[fr.out:]...)
	out = out[:fr.out]
	first := true
	for _, k := range sh.order {
		m := &ms[k]
		if m.drop {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, w.perm[m.start-fr.out:m.end-fr.out]...)
	}
	return out, nil
}

// sortKey is a name to sort: its prefix and its index in its object.
type sortKey struct {
	pre uint64
	k   int32
}

// sortNames puts the names of ms, which came out of order, in order in
// w.keys and checks them as close does: a duplicate is reported by
// sortRefs itself, so that the error is the token parser's; names equal
// under folding by checkFold, in foldNames mode (when foldy). Names mostly
// differ in their first eight bytes, so the sort mostly compares prefixes.
func (w *work) sortNames(ms []keyRef, foldy bool) error {
	p := &w.p
	ks := w.keys[:0]
	for k := range ms {
		ks = append(ks, sortKey{pre: ms[k].pre, k: int32(k)})
	}
	w.keys = ks
	cmp := func(x, y sortKey) int {
		if c := comparePrefix(x.pre, y.pre); c != 0 {
			return c
		}
		return compareUTF16(p.refName(ms[x.k]), p.refName(ms[y.k]))
	}
	if len(ks) <= 24 {
		for i := 1; i < len(ks); i++ {
			x := ks[i]
			j := i
			for ; j > 0 && cmp(ks[j-1], x) > 0; j-- {
				ks[j] = ks[j-1]
			}
			ks[j] = x
		}
	} else {
		slices.SortFunc(ks, cmp)
	}
	for j := 1; j < len(ks); j++ {
		if x, y := ks[j-1], ks[j]; x.pre == y.pre && string(p.refName(ms[x.k])) == string(p.refName(ms[y.k])) {
			if err := p.sortRefs(ms); err != nil {
				return err
			}
			return dupError(p.refName(ms[y.k]))
		}
	}
	if foldy {
		refs := p.refs[:0]
		for _, x := range ks {
			refs = append(refs, ms[x.k])
		}
		p.refs = refs
		return p.checkFold()
	}
	return nil
}

// checkFoldOf is checkFold for the names ms, in order.
func (p *parser) checkFoldOf(ms []keyRef) error {
	refs := p.refs
	p.refs = ms
	err := p.checkFold()
	p.refs = refs
	return err
}

// A shape is the names of an object that was not in order, as they came,
// and the order they sort in. The stream writer remembers a few of them,
// so that the next object with the same names in the same order, as the
// records of an array mostly are, and as the bodies one client sends to
// one endpoint mostly are, is put in order without sorting its names or
// checking them again: the same names sort alike and are as free of
// duplicates and of names equal under folding, when read in the same mode.
// So the shapes outlive a body, in the pooled work, until a body is read in
// another mode (work.shapeMode).
type shape struct {
	names []shapeName // as they came
	long  []byte      // the bytes of the names beyond 8 bytes
	order []int32     // the index, in the order they came, of each name in sorted order
}

// shapeSlot picks the slot of work.shapes for an object at depth whose
// names are ms: by its depth and its first name's prefix, so that the few
// objects of a body's shape mostly keep a slot each. (An object's number
// of names, mixed in too, made two of a payment body's five shapes share
// a slot, and sort again in every body.)
func shapeSlot(depth int, ms []keyRef) int {
	h := (ms[0].pre ^ uint64(depth)<<56) * 0x9e3779b97f4a7c15
	return int(h >> (64 - shapeBits))
}

// shapeBits is log2 of the number of shapes a work keeps.
const shapeBits = 5

// shapeName is one name of a shape: its prefix and length and, for a name
// beyond 8 bytes, where its bytes are in the shape's long.
type shapeName struct {
	pre  uint64
	n, a int32
}

// same reports whether the names of ms, in the order they came, are sh's.
// Two names of at most 8 bytes are equal when their prefixes and lengths
// are.
func (sh *shape) same(p *parser, ms []keyRef) bool {
	if len(ms) != len(sh.names) {
		return false
	}
	for k := range ms {
		m, s := &ms[k], &sh.names[k]
		if m.pre != s.pre || m.b-m.a != s.n {
			return false
		}
		if s.n > 8 && string(p.refName(*m)[8:]) != string(sh.long[s.a+8:s.a+s.n]) {
			return false
		}
	}
	return true
}

// remember makes the names ms, in the order ks sorts them, sh's.
func (sh *shape) remember(p *parser, ms []keyRef, ks []sortKey) {
	sh.names = sh.names[:0]
	sh.long = sh.long[:0]
	for _, m := range ms {
		s := shapeName{pre: m.pre, n: m.b - m.a}
		if s.n > 8 {
			s.a = int32(len(sh.long))
			sh.long = append(sh.long, p.refName(m)...)
		}
		sh.names = append(sh.names, s)
	}
	sh.order = sh.order[:0]
	for _, x := range ks {
		sh.order = append(sh.order, x.k)
	}
}
