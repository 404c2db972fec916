package fingerprint

import "unicode/utf8"

// pattern is one compiled allow or deny path.
type pattern struct {
	steps []step
	allow bool
	deep  bool // has "**": the only way one pattern holds several states
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
	names nameSet
	pats  []pattern // every other path, allow and deny
	allow bool      // an allow-list is present
	root  []state   // the states before the first step
}

// compileFilter compiles the allow and deny paths. With fold, a name step
// of an allow path matches a member whose name equals it under Unicode
// simple case folding, as encoding/json fills a struct field: a member
// "Amount" is the handler's amount, and must count where "amount" is
// allowed. Deny paths always match exactly: a case variant of a denied
// name then counts, which can only make a fingerprint stricter.
func compileFilter(allow, deny []string, fold bool) (*filter, error) {
	f := &filter{}
	for _, src := range deny {
		steps, err := parsePath(src)
		if err != nil {
			return nil, err
		}
		if len(steps) == 2 && steps[0].kind == stepAnyDepth && steps[1].kind == stepName {
			f.names.add(steps[1].name)
			continue
		}
		f.pats = append(f.pats, pattern{steps: steps, deep: deep(steps)})
	}
	for _, src := range allow {
		steps, err := parsePath(src)
		if err != nil {
			return nil, err
		}
		for i := range steps {
			steps[i].fold = fold && steps[i].kind == stepName && utf8.ValidString(steps[i].name)
		}
		f.pats = append(f.pats, pattern{steps: steps, allow: true, deep: deep(steps)})
		f.allow = true
	}
	var w work
	for i := range f.pats {
		w.add(f, 0, state{pat: int32(i)})
	}
	f.root = w.states
	return f, nil
}

func deep(steps []step) bool {
	for _, st := range steps {
		if st.kind == stepAnyDepth {
			return true
		}
	}
	return false
}

func (f *filter) empty() bool { return f.names.n == 0 && len(f.pats) == 0 }

// denied reports whether name is one of the "**.name" deny paths.
func (f *filter) denied(name []byte) bool {
	return f.names.n > 0 && f.names.has(name)
}

// nameSet is a small set of member names, looked up once per member of
// every body: most names fail the first-byte check, the rest compare with
// the few names of their length.
type nameSet struct {
	n     int
	bloom [4]uint64 // by a hash of each name's prefix and length, see mayHold
	first [256]bool
	short [32][]string // by length
	long  map[string]bool
}

func (s *nameSet) add(name string) {
	if s.has([]byte(name)) {
		return
	}
	s.n++
	h := bloomBit(namePrefix([]byte(name), 0, int32(len(name))), len(name))
	s.bloom[h>>6] |= 1 << (h & 63)
	s.first[name[0]] = true
	if len(name) < len(s.short) {
		s.short[len(name)] = append(s.short[len(name)], name)
		return
	}
	if s.long == nil {
		s.long = make(map[string]bool)
	}
	s.long[name] = true
}

func (s *nameSet) has(name []byte) bool {
	if len(name) == 0 || !s.first[name[0]] {
		return false
	}
	if len(name) < len(s.short) {
		for _, n := range s.short[len(name)] {
			if n == string(name) {
				return true
			}
		}
		return false
	}
	return s.long[string(name)]
}

// mayHold reports whether the set may hold a name of n bytes whose prefix
// (namePrefix) is pre: false means it does not, true that has must say.
// With the dozen names of the default list, it answers false for nearly
// every other name at the cost of a multiplication.
func (s *nameSet) mayHold(pre uint64, n int) bool {
	h := bloomBit(pre, n)
	return s.bloom[h>>6]&(1<<(h&63)) != 0
}

func bloomBit(pre uint64, n int) uint64 {
	return (pre + uint64(n)) * 0x9e3779b97f4a7c15 >> 56
}

// add appends s, and the states it reaches by skipping a "**", to the
// states from start on, unless they are there already. A pattern without
// "**" has one state at most, so only deep patterns need the check.
func (w *work) add(f *filter, start int, s state) {
	if !f.pats[s.pat].deep {
		w.states = append(w.states, s)
		return
	}
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
			st.kind == stepName && !elem && (st.name == string(name) || st.fold && equalFoldName(st.name, name)):
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
