package fingerprint

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

// member is one member of an object the stream writer has open.
type member struct {
	a, b  int32 // the name's span, in the input or, with fDecoded, in p.dec
	start int32 // where the member ("name":value) starts in the output
	end   int32 // where its value ends in the output
	cut   int32 // where the output goes back to when the member is dropped: before its comma
	flags uint8 // the name token's flags: fDecoded, fFoldy, fWide
	drop  bool  // a "**.name" deny path drops the member
}

// name returns the unescaped name of m.
func (p *parser) name(m *member) []byte {
	if m.flags&fDecoded != 0 {
		return p.dec[m.a:m.b]
	}
	return p.in[m.a:m.b]
}

// stream parses in, read as m says, and appends its canonical form to
// w.out, leaving out every member whose name f.names holds when f is not
// nil. f must have no other paths. It follows parse step for step, so that
// its errors are parse's, in the same order.
func (w *work) stream(in []byte, maxDepth int, f *filter, m mode) error {
	p := &w.p
	p.reset(in, maxDepth, m)
	deny := f != nil && f.names.n > 0
	out := w.out
	if cap(out)-len(out) < len(in) {
		out = growOut(out, len(in))
	}
	mems := w.mems[:0]
	defer func() { w.mems = mems[:0] }()
	n := len(in)
	i := 0
	var err error
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
					return err
				}
			}
			continue value
		case '"':
			if i, err = p.str(i, kString); err != nil {
				return err
			}
			out = writeString(out, p, p.toks[0])
			p.toks = p.toks[:0]
		case 't':
			if i, err = p.lit(i, "true", kTrue); err != nil {
				return err
			}
			out = append(out, "true"...)
			p.toks = p.toks[:0]
		case 'f':
			if i, err = p.lit(i, "false", kFalse); err != nil {
				return err
			}
			out = append(out, "false"...)
			p.toks = p.toks[:0]
		case 'n':
			if i, err = p.lit(i, "null", kNull); err != nil {
				return err
			}
			out = append(out, "null"...)
			p.toks = p.toks[:0]
		default:
			if c != '-' && (c < '0' || c > '9') {
				return errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
			if i, err = p.number(i); err != nil {
				return err
			}
			out = writeScalar(out, p, p.toks[0])
			p.toks = p.toks[:0]
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
					return errAt(ErrInvalidJSON, "unexpected "+quoteByte(in[i])+" after the top-level value", i)
				}
				w.out = out
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
					if i, out, mems, err = w.streamKey(skipWS(in, i), out, mems, f, deny); err != nil {
						return err
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
					return err
				}
				mems = mems[:fr.mark]
				out = append(out, '}')
			case c == ']' && !obj:
				i++
				p.stack = p.stack[:len(p.stack)-1]
				out = append(out, ']')
			default:
				return errAt(ErrInvalidJSON, "unexpected "+quoteByte(c), i)
			}
		}
	}
}

// streamKey is key for the stream writer: it scans the member name at
// in[i] and the colon after it, notes the member and writes its name.
func (w *work) streamKey(i int, out []byte, mems []member, f *filter, deny bool) (int, []byte, []member, error) {
	p := &w.p
	in := p.in
	if i >= len(in) || in[i] != '"' {
		if i >= len(in) {
			return i, out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, out, mems, errAt(ErrInvalidJSON, "expected a member name, found "+quoteByte(in[i]), i)
	}
	var err error
	if p.mode&foldNames != 0 {
		i, err = p.foldKey(i)
	} else {
		i, err = p.str(i, kKey)
	}
	if err != nil {
		return i, out, mems, err
	}
	t := p.toks[0]
	p.toks = p.toks[:0]
	i = skipWS(in, i)
	if i >= len(in) || in[i] != ':' {
		if i >= len(in) {
			return i, out, mems, errAt(ErrInvalidJSON, "unexpected end of input", i)
		}
		return i, out, mems, errAt(ErrInvalidJSON, "expected ':', found "+quoteByte(in[i]), i)
	}
	fr := &p.stack[len(p.stack)-1]
	mm := member{a: t.a, b: t.b, flags: t.flags, cut: int32(len(out))}
	if len(out) > int(fr.out) {
		out = append(out, ',')
	}
	mm.start = int32(len(out))
	name := p.name(&mm)
	if deny && f.denied(name) {
		mm.drop = true
	}
	if fr.sorted && len(mems) > int(fr.mark) && compareUTF16(p.name(&mems[len(mems)-1]), name) >= 0 {
		fr.sorted = false
	}
	mems = append(mems, mm)
	out = writeString(out, p, t)
	out = append(out, ':')
	return i + 1, out, mems, nil
}

// closeObject checks the names of the object fr that has just closed, whose
// members are ms, as close does, and puts its members in order when they
// were not.
func (w *work) closeObject(fr frame, ms []member, out []byte) ([]byte, error) {
	if len(ms) < 2 {
		return out, nil
	}
	p := &w.p
	refs := p.refs[:0]
	for k := range ms {
		refs = append(refs, keyRef{a: ms[k].a, b: ms[k].b, tok: int32(k), flags: ms[k].flags})
	}
	p.refs = refs
	if !fr.sorted {
		if err := p.sortRefs(refs); err != nil {
			return out, err
		}
	}
	if fr.foldy {
		if err := p.checkFold(); err != nil {
			return out, err
		}
	}
	if fr.sorted {
		return out, nil
	}
	w.perm = append(w.perm[:0], out[fr.out:]...)
	out = out[:fr.out]
	first := true
	for _, r := range refs {
		m := &ms[r.tok]
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
