package fingerprint

// pattern is one compiled allow or deny path.
type pattern struct {
	steps []step
	allow bool
}

// state is a position in one pattern: steps[:pos] have matched the path so
// far. The set of live states is a small NFA walked along with the body.
type state struct {
	pat, pos int32
}

// filter is the compiled field selection of a Builder. It is immutable and
// shared by every call.
type filter struct {
	// names holds the deny paths of the form "**.name", the whole default
	// list among them: a member with such a name is dropped at any depth
	// with one lookup, without walking the NFA.
	names map[string]struct{}
	first [256]bool // first bytes of names, a cheap pre-check
	pats  []pattern // every other path, allow and deny
	allow bool      // an allow-list is present
	root  []state   // the states before the first step
}

func compileFilter(allow, deny []string) (*filter, error) {
	f := &filter{}
	for _, src := range deny {
		steps, err := parsePath(src)
		if err != nil {
			return nil, err
		}
		if len(steps) == 2 && steps[0].kind == stepAnyDepth && steps[1].kind == stepName {
			if f.names == nil {
				f.names = make(map[string]struct{})
			}
			f.names[steps[1].name] = struct{}{}
			f.first[steps[1].name[0]] = true
			continue
		}
		f.pats = append(f.pats, pattern{steps: steps})
	}
	for _, src := range allow {
		steps, err := parsePath(src)
		if err != nil {
			return nil, err
		}
		f.pats = append(f.pats, pattern{steps: steps, allow: true})
		f.allow = true
	}
	var w work
	for i := range f.pats {
		w.add(f, 0, state{pat: int32(i)})
	}
	f.root = w.states
	return f, nil
}

func (f *filter) empty() bool { return len(f.names) == 0 && len(f.pats) == 0 }

// denied reports whether name is one of the "**.name" deny paths.
func (f *filter) denied(name []byte) bool {
	if len(name) == 0 || !f.first[name[0]] {
		return false
	}
	_, ok := f.names[string(name)]
	return ok
}

// add appends s, and the states it reaches by skipping a "**", to the
// states from start on, unless they are there already.
func (w *work) add(f *filter, start int, s state) {
	for {
		for _, o := range w.states[start:] {
			if o == s {
				return
			}
		}
		w.states = append(w.states, s)
		steps := f.pats[s.pat].steps
		if int(s.pos) >= len(steps) || steps[s.pos].kind != stepAnyDepth {
			return
		}
		s.pos++
	}
}

// advance appends the states reached from w.states[lo:hi] by one step: an
// array element when elem is true, else the member called name. Allow
// states are skipped unless withAllow.
func (w *work) advance(f *filter, lo, hi int, elem bool, name []byte, withAllow bool) {
	start := len(w.states)
	for j := lo; j < hi; j++ {
		s := w.states[j]
		pt := &f.pats[s.pat]
		if (pt.allow && !withAllow) || int(s.pos) >= len(pt.steps) {
			continue
		}
		st := &pt.steps[s.pos]
		switch {
		case st.kind == stepAnyDepth:
			w.add(f, start, s)
		case st.kind == stepElem && elem,
			st.kind == stepAnyName && !elem,
			st.kind == stepName && !elem && st.name == string(name):
			w.add(f, start, state{pat: s.pat, pos: s.pos + 1})
		}
	}
}

// classify reads the states w.states[lo:hi] of one value: denied when a
// deny path matched it, full when an allow path matched it, live when an
// allow path may still match something inside it.
func (w *work) classify(f *filter, lo, hi int) (denied, full, live bool) {
	for _, s := range w.states[lo:hi] {
		pt := &f.pats[s.pat]
		end := int(s.pos) == len(pt.steps)
		switch {
		case end && !pt.allow:
			denied = true
		case end:
			full = true
		case pt.allow:
			live = true
		}
	}
	return denied, full, live
}

// dropAllow removes the allow states from w.states[lo:]: inside a value an
// allow path matched, only deny paths matter.
func (w *work) dropAllow(f *filter, lo int) {
	keep := w.states[:lo]
	for _, s := range w.states[lo:] {
		if !f.pats[s.pat].allow {
			keep = append(keep, s)
		}
	}
	w.states = keep
}

// member classifies the member called name (or an array element when elem)
// of a value whose states are w.states[lo:hi] and pushes its own states.
// It reports whether the member counts at all and whether all of it counts.
func (w *work) member(f *filter, lo, hi int, elem bool, name []byte, whole bool) (ok, childWhole bool) {
	if !elem && f.denied(name) {
		return false, whole
	}
	if len(f.pats) == 0 {
		return true, whole
	}
	mark := len(w.states)
	w.advance(f, lo, hi, elem, name, !whole)
	denied, full, live := w.classify(f, mark, len(w.states))
	switch {
	case denied:
		return false, whole
	case whole:
		return true, true
	case full:
		w.dropAllow(f, mark)
		return true, true
	}
	return live, false
}
