package fingerprint

import "slices"

// An object whose members did not come in order, as the stream writer
// (stream.go) meets it on closing: its names checked, its members sorted
// into the canonical order, and the order of the names remembered, so that
// the next body with the same shape sorts by a lookup.

// closeObject checks the names of the object fr that has just closed, whose
// members are ms, as close does, and puts its members in order when they
// were not. out must then hold all of the object's output: streamValue
// copies its pending run there first.
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
