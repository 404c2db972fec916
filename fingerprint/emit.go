package fingerprint

// filtered writes the canonical form of the parsed body with f applied.
func (w *work) filtered(f *filter) {
	w.states = append(w.states[:0], f.root...)
	p := &w.p
	if !w.fvalue(f, 0, 0, len(w.states), !f.allow) && p.toks[0].kind != kObject && p.toks[0].kind != kArray {
		// A top-level scalar that no allow path selects.
		w.out = append(w.out, "null"...)
	}
}

// fvalue writes the value at token i, whose path states are
// w.states[lo:hi]. whole means all of the value counts (no allow-list, or
// an allow path matched it or an ancestor); otherwise the value lies on the
// way to what an allow path may select. It reports whether anything of the
// value counts; the caller removes what it wrote when nothing does.
//
// The rules, documented in doc.go: a member that matches a deny path is
// dropped; on the way to an allow path, an object keeps the members that
// count and counts only if one does, an array keeps every position (an
// element that does not count is written as null) and counts if it has any
// element, a scalar does not count.
func (w *work) fvalue(f *filter, i int32, lo, hi int, whole bool) bool {
	p := &w.p
	t := p.toks[i]
	switch t.kind {
	case kObject:
		w.out = append(w.out, '{')
		written := false
		o := p.order[t.b]
		for _, k := range p.order[t.b+1 : t.b+1+o] {
			mark := len(w.states)
			ok, cw := w.member(f, lo, hi, false, p.keyBytes(k), whole)
			if ok {
				at := len(w.out)
				if written {
					w.out = append(w.out, ',')
				}
				w.out = writeString(w.out, p, p.toks[k])
				w.out = append(w.out, ':')
				if w.fvalue(f, k+1, mark, len(w.states), cw) {
					written = true
				} else {
					w.out = w.out[:at]
				}
			}
			w.states = w.states[:mark]
		}
		w.out = append(w.out, '}')
		return whole || written
	case kArray:
		w.out = append(w.out, '[')
		for j := i + 1; j < t.a; j = p.next(j) {
			if j > i+1 {
				w.out = append(w.out, ',')
			}
			mark := len(w.states)
			ok, cw := w.member(f, lo, hi, true, nil, whole)
			if ok {
				at := len(w.out)
				if !w.fvalue(f, j, mark, len(w.states), cw) {
					w.out = w.out[:at]
					ok = false
				}
			}
			if !ok {
				w.out = append(w.out, "null"...)
			}
			w.states = w.states[:mark]
		}
		w.out = append(w.out, ']')
		return whole || t.a > i+1
	default:
		if !whole {
			return false
		}
		w.out = writeScalar(w.out, p, t)
		return true
	}
}
