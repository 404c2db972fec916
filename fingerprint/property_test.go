package fingerprint

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// jsonGen writes random JSON trees, each time with its own member order,
// whitespace and spellings of the same strings and numbers.
type jsonGen struct{ rng *rand.Rand }

// tree is a generated value: a scalar literal (in one canonical spelling),
// an object, or an array.
type tree struct {
	scalar  string
	keys    []string
	members []*tree
	elems   []*tree
	isObj   bool
}

func (g jsonGen) value(depth int) *tree {
	switch n := g.rng.IntN(10); {
	case depth < 4 && n < 3:
		t := &tree{isObj: true}
		seen := map[string]bool{}
		for range g.rng.IntN(6) {
			k := []string{"a", "b", "é", "\U0001F600", "\ue000", "amount", "items", "x y", `q"`, "10", "1"}[g.rng.IntN(11)]
			if seen[k] {
				continue
			}
			seen[k] = true
			t.keys = append(t.keys, k)
			t.members = append(t.members, g.value(depth+1))
		}
		return t
	case depth < 4 && n < 5:
		t := &tree{}
		for range g.rng.IntN(5) {
			t.elems = append(t.elems, g.value(depth+1))
		}
		return t
	case n < 7:
		return &tree{scalar: strconv.Quote([]string{"", "x", "caf\u00e9", "\u263a\t", "line\nbreak", "\U0001F600"}[g.rng.IntN(6)])}
	case n < 9:
		return &tree{scalar: []string{"0", "1", "-1", "4.5", "0.1", "1e+21", "1e-7", "123456789"}[g.rng.IntN(8)]}
	default:
		return &tree{scalar: []string{"true", "false", "null"}[g.rng.IntN(3)]}
	}
}

// write serializes t with a random member order, random whitespace and
// random but equivalent spellings.
func (g jsonGen) write(b *strings.Builder, t *tree) {
	ws := func() {
		b.WriteString([]string{"", " ", "\n  ", "\t"}[g.rng.IntN(4)])
	}
	switch {
	case t.isObj:
		b.WriteByte('{')
		for i, j := range g.rng.Perm(len(t.keys)) {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			b.WriteString(g.spellString(strconv.Quote(t.keys[j])))
			ws()
			b.WriteByte(':')
			ws()
			g.write(b, t.members[j])
		}
		ws()
		b.WriteByte('}')
	case t.scalar == "" && !t.isObj:
		b.WriteByte('[')
		for i, e := range t.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			g.write(b, e)
		}
		ws()
		b.WriteByte(']')
	case t.scalar[0] == '"':
		b.WriteString(g.spellString(t.scalar))
	default:
		b.WriteString(g.spellNumber(t.scalar))
	}
}

// spellString escapes some characters of a Go-quoted string the JSON way.
func (g jsonGen) spellString(q string) string {
	s, _ := strconv.Unquote(q)
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || g.rng.IntN(4) == 0:
			if r >= 0x10000 {
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04X\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (g jsonGen) spellNumber(n string) string {
	if n == "true" || n == "false" || n == "null" {
		return n
	}
	v, _ := strconv.ParseFloat(n, 64)
	switch g.rng.IntN(4) {
	case 0:
		return strconv.FormatFloat(v, 'e', -1, 64)
	case 1:
		return strconv.FormatFloat(v, 'E', 20, 64)
	case 2:
		if v == 0 {
			return "-0.000"
		}
		return strconv.FormatFloat(v, 'g', 17, 64)
	}
	return n
}

// TestPropertySpelling: however a value is written, it hashes alike; and
// changing any one scalar changes the digest.
func TestPropertySpelling(t *testing.T) {
	g := jsonGen{rand.New(rand.NewPCG(7, 11))}
	b := newBuilder(t)
	for i := range 500 {
		tr := g.value(0)
		var x, y strings.Builder
		g.write(&x, tr)
		g.write(&y, tr)
		dx, err := b.Sum([]byte(x.String()))
		if err != nil {
			t.Fatalf("case %d: %v in %s", i, err, x.String())
		}
		dy, err := b.Sum([]byte(y.String()))
		if err != nil || dx != dy {
			t.Fatalf("case %d: %s and %s hash differently (%v)", i, x.String(), y.String(), err)
		}
		leaves := collectScalars(tr, nil)
		if len(leaves) == 0 {
			continue
		}
		leaf := leaves[g.rng.IntN(len(leaves))]
		old := leaf.scalar
		leaf.scalar = `"changed"`
		if old == leaf.scalar {
			leaf.scalar = "42"
		}
		var z strings.Builder
		g.write(&z, tr)
		leaf.scalar = old
		if dz, err := b.Sum([]byte(z.String())); err != nil || dz == dx {
			t.Fatalf("case %d: changing %s in %s left the digest (%v)", i, old, x.String(), err)
		}
	}
}

func collectScalars(t *tree, acc []*tree) []*tree {
	if t.scalar != "" {
		return append(acc, t)
	}
	for _, m := range t.members {
		acc = collectScalars(m, acc)
	}
	for _, e := range t.elems {
		acc = collectScalars(e, acc)
	}
	return acc
}
