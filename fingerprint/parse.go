package fingerprint

import "slices"

// Token kinds. The parser turns the input into a flat, pre-order slice of
// tokens that point into the input; the writers walk it without recursion
// into the input again.
const (
	kNull uint8 = iota + 1
	kFalse
	kTrue
	kNumber // a,b: canonical literal span in the input; with fDecoded, in dec; with fFloat, a indexes nums
	kString // a,b: content span in the input; with fDecoded, a span in dec
	kKey    // like kString, for a member name
	kObject // a: index of the token after the subtree; b: index in order
	kArray  // a: index of the token after the subtree
)

// Token flags.
const (
	fDecoded uint8 = 1 << iota // a string that held escapes, or a rewritten number; a,b index dec
	fFloat                     // the number is not canonical as written; a indexes nums
	fFoldy                     // foldNames mode: a name with a byte folding may change (nameClass)
	fWide                      // foldNames mode: a name with a non-ASCII byte
)

// tok is one JSON token. It is 12 bytes so that large bodies stay cheap.
type tok struct {
	a, b  int32
	kind  uint8
	flags uint8
}

// frame is one open container while parsing.
type frame struct {
	tok   int32 // index of the container's token
	mark  int32 // len(keys) when the object opened
	out   int32 // stream writer: where the container's contents start in the output
	obj   bool
	foldy bool // foldNames mode: a name has fFoldy, so close calls checkFold
	// sorted is the stream writer's: the object's names so far came in
	// strictly increasing order, so it needs no sort.
	sorted bool
}

// parser holds the scan of one body. Its slices are reused through a pool.
type parser struct {
	in    []byte
	toks  []tok
	dec   []byte    // decoded strings that held escapes
	nums  []float64 // numbers not canonical as written
	order []int32   // per object: member count, then its key tokens sorted
	keys  []int32   // key tokens of the objects still open
	stack []frame
	refs  []keyRef // scratch for sorting one object's names
	fold  []keyRef // scratch for grouping one object's names by case folding
	max   int      // depth limit
	mode  mode
}

// mode says how a parser reads a body where a Go server and RFC 8785
// disagree. Canonicalize uses none of it: it is RFC 8785 alone.
type mode uint8

const (
	// exactInts keeps the digits of every integer literal (no fraction,
	// no exponent) instead of rounding it to a double: encoding/json
	// decodes 9007199254740993 into an int64 exactly.
	exactInts mode = 1 << iota
	// foldNames rejects two member names of one object that are equal
	// under Unicode simple case folding: encoding/json matches a struct
	// field by such a name, the last match winning.
	foldNames
)

func (p *parser) reset(in []byte, maxDepth int, m mode) {
	p.in = in
	p.mode = m
	p.toks = p.toks[:0]
	p.dec = p.dec[:0]
	p.nums = p.nums[:0]
	p.order = p.order[:0]
	p.keys = p.keys[:0]
	p.stack = p.stack[:0]
	p.max = maxDepth
}

// parse scans p.in as one JSON text in a single pass. It never recurses:
// open containers live on p.stack, which the depth limit bounds, so deep
// input costs neither call stack nor more than one step per byte.
func (p *parser) parse() error {
	in := p.in
	n := len(in)
	i := 0
	var err error
	if n > 0 && len(p.toks) == 0 {
		// Typical bodies hold a token every 8 to 12 bytes: one
		// allocation instead of a series of doublings.
		p.toks = slices.Grow(p.toks, n/8+4)
	}
value:
	for {
		i = skipWS(in, i)
		if i >= n {
			return errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		switch c := in[i]; c {
		case '{', '[':
			if len(p.stack) >= p.max {
				return errAt(ErrTooDeep, "nesting deeper than the limit", i)
			}
			kind := kArray
			if c == '{' {
				kind = kObject
			}
			p.stack = append(p.stack, frame{tok: int32(len(p.toks)), mark: int32(len(p.keys)), obj: c == '{'})
			p.toks = append(p.toks, tok{kind: kind})
			i = skipWS(in, i+1)
			if i < n && (in[i] == '}' && c == '{' || in[i] == ']' && c == '[') {
				i++
				if err = p.close(); err != nil {
					return err
				}
				break // to the closing loop below
			}
			if c == '{' {
				if i, err = p.key(i); err != nil {
					return err
				}
			}
			continue value
		case '"':
			if i, err = p.str(i, kString); err != nil {
				return err
			}
		case 't':
			if i, err = p.lit(i, "true", kTrue); err != nil {
				return err
			}
		case 'f':
			if i, err = p.lit(i, "false", kFalse); err != nil {
				return err
			}
		case 'n':
			if i, err = p.lit(i, "null", kNull); err != nil {
				return err
			}
		default:
			if c != '-' && (c < '0' || c > '9') {
				return errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
			if i, err = p.number(i); err != nil {
				return err
			}
		}
		// A value ended: close containers until one expects another value.
		for {
			i = skipWS(in, i)
			if len(p.stack) == 0 {
				if i != n {
					return errAt(ErrInvalidJSON, "unexpected "+quoteByte(in[i])+" after the top-level value", i)
				}
				return nil
			}
			if i >= n {
				return errAt(ErrInvalidJSON, "unexpected end of input", i)
			}
			obj := p.stack[len(p.stack)-1].obj
			switch c := in[i]; {
			case c == ',':
				i++
				if obj {
					if i, err = p.key(skipWS(in, i)); err != nil {
						return err
					}
				}
				continue value
			case c == '}' && obj, c == ']' && !obj:
				i++
				if err = p.close(); err != nil {
					return err
				}
			default:
				return errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
		}
	}
}

// key scans a member name at in[i] and the colon after it.
func (p *parser) key(i int) (int, error) {
	if i >= len(p.in) || p.in[i] != '"' {
		if i >= len(p.in) {
			return i, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, errAt(ErrInvalidJSON, "expected a member name, found "+quoteByte(p.in[i]), i)
	}
	p.keys = append(p.keys, int32(len(p.toks)))
	var err error
	if p.mode&foldNames != 0 {
		i, err = p.foldKey(i)
	} else {
		i, err = p.str(i, kKey)
	}
	if err != nil {
		return i, err
	}
	i = skipWS(p.in, i)
	if i >= len(p.in) || p.in[i] != ':' {
		if i >= len(p.in) {
			return i, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, errAt(ErrInvalidJSON, "expected ':', found "+quoteByte(p.in[i]), i)
	}
	return i + 1, nil
}

// close ends the innermost container. An object's member names are sorted
// here, once, and duplicates are found as equal neighbours.
func (p *parser) close() error {
	f := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	t := &p.toks[f.tok]
	t.a = int32(len(p.toks))
	if !f.obj {
		return nil
	}
	keys := p.keys[f.mark:]
	if len(keys) > 1 {
		if err := p.sortKeys(keys); err != nil {
			return err
		}
		if f.foldy {
			if err := p.checkFold(); err != nil {
				return err
			}
		}
	}
	t.b = int32(len(p.order))
	p.order = append(p.order, int32(len(keys)))
	p.order = append(p.order, keys...)
	p.keys = p.keys[:f.mark]
	return nil
}

// keyBytes returns the unescaped name of key token k.
func (p *parser) keyBytes(k int32) []byte {
	t := p.toks[k]
	if t.flags&fDecoded != 0 {
		return p.dec[t.a:t.b]
	}
	return p.in[t.a:t.b]
}

// next returns the index of the token after the value at i.
func (p *parser) next(i int32) int32 {
	if t := p.toks[i]; t.kind == kObject || t.kind == kArray {
		return t.a
	}
	return i + 1
}

func (p *parser) lit(i int, word string, kind uint8) (int, error) {
	if len(p.in)-i < len(word) || string(p.in[i:i+len(word)]) != word {
		return i, errAt(ErrInvalidJSON, "invalid literal", i)
	}
	p.toks = append(p.toks, tok{kind: kind})
	return i + len(word), nil
}

func skipWS(in []byte, i int) int {
	for i < len(in) {
		switch in[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&15]})
}
