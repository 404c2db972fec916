package fingerprint

import (
	"bytes"
	"slices"
)

// pair is one name=value of a query string or form body, unescaped into
// work.scratch. A name or value whose escapes are malformed is kept as
// written and flagged raw, so that it never equals a well-formed one and
// two different malformed ones never merge.
type pair struct {
	k0, k1, v0, v1 int32
	kraw, vraw     bool
}

// queryPairs appends the canonical form of the query string raw: the
// parameters the Builder lets count, sorted by name, the values of one name
// in the order sent.
func (w *work) queryPairs(b *Builder, raw string) {
	parsePairs(w, raw)
	w.keepPairs(func(name []byte) bool {
		if b.queryAllow != nil && !b.queryAllow[string(name)] {
			return false
		}
		return !b.queryDeny[string(name)]
	})
	w.writePairs()
}

// formPairs appends the canonical form of a form body. The allow- and
// deny-lists apply to its names as to the members of a top-level object:
// "**.nonce" and "nonce" both drop a field called nonce, and under an
// allow-list only the names an allow path matches whole count.
func (w *work) formPairs(b *Builder, body []byte) {
	f := b.filter
	parsePairs(w, body)
	w.states = append(w.states[:0], f.root...)
	root := len(w.states)
	w.keepPairs(func(name []byte) bool {
		ok, whole := w.member(f, 0, root, false, name, !f.allow)
		w.states = w.states[:root]
		return ok && whole
	})
	w.writePairs()
}

// parsePairs splits s at '&' and each piece at its first '=', skipping
// empty pieces, as net/url does; a piece without '=' has an empty value.
func parsePairs[S string | []byte](w *work, s S) {
	w.pairs = w.pairs[:0]
	w.scratch = w.scratch[:0]
	for len(s) > 0 {
		var piece S
		if i := index(s, '&'); i >= 0 {
			piece, s = s[:i], s[i+1:]
		} else {
			piece, s = s, s[:0]
		}
		if len(piece) == 0 {
			continue
		}
		var p pair
		k, v := piece, piece[:0]
		if i := index(piece, '='); i >= 0 {
			k, v = piece[:i], piece[i+1:]
		}
		p.k0, p.k1, p.kraw = unescape(w, k)
		p.v0, p.v1, p.vraw = unescape(w, v)
		w.pairs = append(w.pairs, p)
	}
}

func index[S string | []byte](s S, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// unescape appends s to w.scratch with '+' as a space and %XX decoded, and
// returns its span. When s holds a '%' not followed by two hex digits, it
// appends s as written and reports raw.
func unescape[S string | []byte](w *work, s S) (int32, int32, bool) {
	start := len(w.scratch)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			w.scratch = append(w.scratch, ' ')
		case '%':
			hi, ok1 := unhex(s, i+1)
			lo, ok2 := unhex(s, i+2)
			if !ok1 || !ok2 {
				w.scratch = append(w.scratch[:start], s...)
				return int32(start), int32(len(w.scratch)), true
			}
			w.scratch = append(w.scratch, hi<<4|lo)
			i += 2
		default:
			w.scratch = append(w.scratch, c)
		}
	}
	return int32(start), int32(len(w.scratch)), false
}

func unhex[S string | []byte](s S, i int) (byte, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch c := s[i]; {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// keepPairs drops the pairs whose name keep refuses.
func (w *work) keepPairs(keep func(name []byte) bool) {
	kept := w.pairs[:0]
	for _, p := range w.pairs {
		if keep(w.scratch[p.k0:p.k1]) {
			kept = append(kept, p)
		}
	}
	w.pairs = kept
}

// writePairs sorts the pairs by name, keeping the order of the values of one
// name, and appends them: their count, then each name and value with its
// raw flag and length.
func (w *work) writePairs() {
	sc := w.scratch
	slices.SortStableFunc(w.pairs, func(x, y pair) int {
		if c := bytes.Compare(sc[x.k0:x.k1], sc[y.k0:y.k1]); c != 0 {
			return c
		}
		// A raw name sorts after the well-formed one with the same bytes.
		return flag(x.kraw) - flag(y.kraw)
	})
	w.out = appendCount(w.out, len(w.pairs))
	for _, p := range w.pairs {
		w.out = appendStr(w.out, byte(flag(p.kraw)), sc[p.k0:p.k1])
		w.out = appendStr(w.out, byte(flag(p.vraw)), sc[p.v0:p.v1])
	}
}

func flag(raw bool) int {
	if raw {
		return 1
	}
	return 0
}
