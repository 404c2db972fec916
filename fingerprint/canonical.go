package fingerprint

import "bytes"

// DefaultMaxDepth is the nesting limit of Canonicalize and the default of
// WithMaxDepth: up to 1000 objects and arrays may be open at once. Deeper
// input fails with ErrTooDeep. No real request body comes near it.
const DefaultMaxDepth = 1000

// MaxDepthLimit is the largest depth WithMaxDepth accepts; larger values are
// lowered to it. Writing canonical output recurses once per level, and this
// bound keeps that recursion small.
const MaxDepthLimit = 10000

// HardMaxBytes is the largest body this package reads: 1 GiB. It is the
// limit of Canonicalize and the ceiling of WithMaxBytes. Larger input fails
// with ErrBodyTooLarge before it is scanned.
const HardMaxBytes = 1 << 30

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text json: member names sorted by their UTF-16 code units, no
// insignificant whitespace, numbers as ECMAScript writes them (-0 as 0) and
// strings escaped as the RFC prescribes. Nothing is filtered: use
// Builder.Canonicalize for the form a Builder hashes, which differs in the
// digits of integers beyond 2^53 and refuses names that differ only in
// case (ErrAmbiguousMember); Canonicalize never returns that error.
//
// Input must be I-JSON (RFC 7493): invalid JSON, duplicate member names,
// numbers out of the range of a double, invalid UTF-8 and lone surrogates
// fail with the package's sentinel errors; nesting beyond DefaultMaxDepth
// fails with ErrTooDeep and input over HardMaxBytes with ErrBodyTooLarge. The
// returned slice is newly allocated; json is not modified or retained.
func Canonicalize(json []byte) ([]byte, error) {
	if len(json) > HardMaxBytes {
		return nil, ErrBodyTooLarge
	}
	w := getWork()
	defer putWork(w)
	if err := w.canonical(json, DefaultMaxDepth, nil, 0); err != nil {
		return nil, err
	}
	return bytes.Clone(w.out), nil
}

// maxStream is the largest body the stream writer takes. Its output
// offsets are 32-bit, and a number's ES6 form can be five and a quarter
// times its literal ("1e20"), so it keeps to bodies whose output stays
// well below 2 GiB; larger ones go through the token tree, which keeps no
// output offsets.
const maxStream = 1 << 28

// canonical parses in, read as m says, and writes its canonical form,
// filtered by f when f is not nil, to w.out. A filter of "**.name" deny
// paths alone, or none, takes the one-pass stream writer; other paths need
// the token tree.
func (w *work) canonical(in []byte, maxDepth int, f *filter, m mode) error {
	if (f == nil || len(f.pats) == 0) && len(in) <= maxStream {
		return w.stream(in, maxDepth, f, m)
	}
	return w.tokens(in, maxDepth, f, m)
}

// tokens is canonical through the token tree: parse, then write with
// filtered, or writeValue when f selects nothing. It is the reference the
// stream writer (stream.go) must agree with, byte for byte and error for
// error; FuzzStream holds them together.
func (w *work) tokens(in []byte, maxDepth int, f *filter, m mode) error {
	w.p.reset(in, maxDepth, m)
	if err := w.p.parse(); err != nil {
		return err
	}
	if cap(w.out)-len(w.out) < len(in) {
		w.out = growOut(w.out, len(in))
	}
	if f == nil || f.empty() {
		w.out = writeValue(w.out, &w.p, 0)
		return nil
	}
	w.filtered(f)
	return nil
}

func growOut(b []byte, n int) []byte {
	nb := make([]byte, len(b), len(b)+n+64)
	copy(nb, b)
	return nb
}

// writeValue appends the canonical form of the value at token i. Its depth
// of recursion is bounded by the parser's depth limit.
func writeValue(dst []byte, p *parser, i int32) []byte {
	t := p.toks[i]
	switch t.kind {
	case kObject:
		dst = append(dst, '{')
		o := p.order[t.b]
		for m, k := range p.order[t.b+1 : t.b+1+o] {
			if m > 0 {
				dst = append(dst, ',')
			}
			dst = writeString(dst, p, p.toks[k])
			dst = append(dst, ':')
			dst = writeValue(dst, p, k+1)
		}
		return append(dst, '}')
	case kArray:
		dst = append(dst, '[')
		for j := i + 1; j < t.a; j = p.next(j) {
			if j > i+1 {
				dst = append(dst, ',')
			}
			dst = writeValue(dst, p, j)
		}
		return append(dst, ']')
	default:
		return writeScalar(dst, p, t)
	}
}

func writeScalar(dst []byte, p *parser, t tok) []byte {
	switch t.kind {
	case kString:
		return writeString(dst, p, t)
	case kNumber:
		switch {
		case t.flags&fFloat != 0:
			return appendES6(dst, p.nums[t.a])
		case t.flags&fDecoded != 0:
			return append(dst, p.dec[t.a:t.b]...)
		}
		return append(dst, p.in[t.a:t.b]...)
	case kTrue:
		return append(dst, "true"...)
	case kFalse:
		return append(dst, "false"...)
	default:
		return append(dst, "null"...)
	}
}

// writeString writes a string or key token. A string without escapes is
// already canonical as written: JSON forbids raw control characters, and
// '"' and '\' cannot appear unescaped.
func writeString(dst []byte, p *parser, t tok) []byte {
	if t.flags&fDecoded != 0 {
		return appendQuoted(dst, p.dec[t.a:t.b])
	}
	dst = append(dst, '"')
	dst = append(dst, p.in[t.a:t.b]...)
	return append(dst, '"')
}
