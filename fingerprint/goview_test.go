package fingerprint

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// goFields has a field for each name the Go-view tests use, each a
// json.RawMessage, so that encoding/json's own matching of member names to
// struct fields decides which member fills it.
type goFields struct {
	Amount json.RawMessage `json:"amount"`
	K      json.RawMessage `json:"k"`
	Key    json.RawMessage `json:"key"`
	S      json.RawMessage `json:"s"`
	Sigma  json.RawMessage `json:"σ"`
	Items  json.RawMessage `json:"items"`
	A      json.RawMessage `json:"a"`
}

// goValue is what a Go handler can read from a JSON value: for an object,
// both what a struct decodes (fields, by encoding/json's case-insensitive
// matching) and what a map decodes (members, by exact name); for a number,
// the float64 encoding/json decodes and, for an integer literal, its exact
// digits (what an int64, a uint64 or a big.Int decodes).
type goValue struct {
	kind    byte // one of {[sn or t f z (null)
	str     string
	f       float64
	exact   string // digits of an integer literal, "" for other numbers
	fields  map[string]*goValue
	members map[string]*goValue
	elems   []*goValue
}

// goView decodes raw with encoding/json, as deep as it goes.
func goView(t *testing.T, raw []byte) *goValue {
	t.Helper()
	raw = bytes.TrimLeft(raw, " \t\r\n")
	v := &goValue{}
	must := func(err error) {
		if err != nil {
			t.Fatalf("encoding/json on %q: %v", raw, err)
		}
	}
	switch c := raw[0]; {
	case c == '{':
		v.kind = '{'
		var s goFields
		must(json.Unmarshal(raw, &s))
		v.fields = map[string]*goValue{}
		sv := []json.RawMessage{s.Amount, s.K, s.Key, s.S, s.Sigma, s.Items, s.A}
		for i, name := range []string{"amount", "k", "key", "s", "σ", "items", "a"} {
			if sv[i] != nil {
				v.fields[name] = goView(t, sv[i])
			}
		}
		var m map[string]json.RawMessage
		must(json.Unmarshal(raw, &m))
		v.members = map[string]*goValue{}
		for name, e := range m {
			v.members[name] = goView(t, e)
		}
	case c == '[':
		v.kind = '['
		var a []json.RawMessage
		must(json.Unmarshal(raw, &a))
		for _, e := range a {
			v.elems = append(v.elems, goView(t, e))
		}
	case c == '"':
		v.kind = 's'
		must(json.Unmarshal(raw, &v.str))
	case c == '-' || c >= '0' && c <= '9':
		v.kind = 'n'
		var n json.Number
		must(json.Unmarshal(raw, &n))
		f, err := n.Float64()
		must(err)
		v.f = f
		if !strings.ContainsAny(string(n), ".eE") {
			v.exact = strings.TrimPrefix(string(n), "-")
			if v.exact != "0" && n[0] == '-' {
				v.exact = "-" + v.exact
			}
		}
	default:
		v.kind = c
	}
	return v
}

// sameToGo reports whether a handler reads x and y alike. Two numbers are
// alike when their doubles are equal and, if both are integer literals,
// their digits are: "1.0" and "1" are one value to every Go type that
// accepts both (an int64 field refuses "1.0").
func sameToGo(x, y *goValue) bool {
	if x.kind != y.kind {
		return false
	}
	switch x.kind {
	case 's':
		return x.str == y.str
	case 'n':
		return x.f == y.f && (x.exact == "" || y.exact == "" || x.exact == y.exact)
	case '[':
		if len(x.elems) != len(y.elems) {
			return false
		}
		for i, e := range x.elems {
			if !sameToGo(e, y.elems[i]) {
				return false
			}
		}
		return true
	case '{':
		return sameMaps(x.fields, y.fields) && sameMaps(x.members, y.members)
	}
	return true
}

func sameMaps(x, y map[string]*goValue) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || !sameToGo(v, w) {
			return false
		}
	}
	return true
}

// goSeeds are bodies that RFC 8785 reads alike in pairs but a Go handler
// does not.
var goSeeds = []string{
	`{"amount":100,"AMOUNT":5}`,
	`{"AMOUNT":5,"amount":100}`,
	`{"amount":9007199254740993}`,
	`{"items":[{"k":1,"K":2}],"\u212a":3}`,
	`{"s":1,"\u017f":2,"σ":[18446744073709551616,1e21,1000000000000000000000]}`,
	`{"Σ":1,"ς":2}`,
}

// FuzzGoReads checks that the canonical form a Builder hashes reads, to a
// Go handler, as the body it came from: the same struct fields (matched
// case-insensitively, the last match winning), the same map members, the
// same integers. Two bodies with one digest have one canonical form, so
// they read alike too.
func FuzzGoReads(f *testing.F) {
	for _, s := range append(goSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	b := newBuilder(f, WithDefaultDeny(false))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := b.Canonicalize(in)
		if err != nil {
			return
		}
		if x, y := goView(t, in), goView(t, out); !sameToGo(x, y) {
			t.Fatalf("a Go handler reads %q and its canonical form %q differently", in, out)
		}
	})
}

// goGen makes small bodies from names that fold alike and integers that
// round to one double, where RFC 8785 and encoding/json disagree most.
type goGen struct{ jsonGen }

func (g goGen) value(depth int) *tree {
	switch n := g.rng.IntN(10); {
	case depth < 3 && n < 4:
		t := &tree{isObj: true}
		seen := map[string]bool{}
		for range g.rng.IntN(4) + 1 {
			k := []string{"amount", "AMOUNT", "Amount", "k", "K", "\u212a", "key", "\u212aey", "s", "S", "\u017f",
				"σ", "Σ", "ς", "items", "a", "b"}[g.rng.IntN(17)]
			if seen[k] {
				continue
			}
			seen[k] = true
			t.keys = append(t.keys, k)
			t.members = append(t.members, g.value(depth+1))
		}
		return t
	case depth < 3 && n < 5:
		t := &tree{}
		for range g.rng.IntN(3) {
			t.elems = append(t.elems, g.value(depth+1))
		}
		return t
	case n < 9:
		return &tree{scalar: goNumbers[g.rng.IntN(len(goNumbers))]}
	default:
		return &tree{scalar: []string{`"x"`, "true", "null"}[g.rng.IntN(3)]}
	}
}

// goNumbers come in pairs that round to one double.
var goNumbers = []string{
	"9007199254740993", "9007199254740992",
	"18446744073709551616", "18446744073709552000",
	"1000000000000000000000", "1e21",
	"-9223372036854775808", "-9223372036854775807",
	"100", "5",
}

// twin returns a copy of t with every number replaced, now and then, by
// the other of its pair.
func (g goGen) twin(t *tree) *tree {
	c := *t
	if t.scalar != "" {
		if i := slices.Index(goNumbers, t.scalar); i >= 0 && g.rng.IntN(2) == 0 {
			c.scalar = goNumbers[i^1]
		}
		return &c
	}
	c.members, c.elems = nil, nil
	for _, m := range t.members {
		c.members = append(c.members, g.twin(m))
	}
	for _, e := range t.elems {
		c.elems = append(c.elems, g.twin(e))
	}
	return &c
}

// TestPropertyGoReads: two bodies that share a digest read alike to a Go
// handler. Each case writes a body twice, in other member orders and
// spellings, once more with numbers swapped for their twins; and every
// body generated is checked against all others with its digest.
func TestPropertyGoReads(t *testing.T) {
	g := goGen{jsonGen{rand.New(rand.NewPCG(13, 17))}}
	b := newBuilder(t)
	seen := map[string]*goValue{}
	bodies := map[string]string{}
	refused, pairs := 0, 0
	for i := range 3000 {
		tr := g.value(0)
		for _, v := range []*tree{tr, tr, g.twin(tr)} {
			var w strings.Builder
			g.write(&w, v)
			body := w.String()
			d, err := b.Sum([]byte(body))
			if err != nil {
				refused++
				continue
			}
			view := goView(t, []byte(body))
			if prev, ok := seen[d]; ok {
				pairs++
				if !sameToGo(prev, view) {
					t.Fatalf("case %d: %s and %s share the digest %s but read differently in Go", i, bodies[d], body, d)
				}
				continue
			}
			seen[d] = view
			bodies[d] = body
		}
	}
	// The test has teeth only if both outcomes happen often.
	if refused < 500 || pairs < 500 {
		t.Errorf("%d bodies refused, %d digests shared; the generator no longer probes both", refused, pairs)
	}
}

func TestGoViewSeesTheIssue(t *testing.T) {
	x := goView(t, []byte(`{"amount":100,"AMOUNT":5}`))
	y := goView(t, []byte(`{"AMOUNT":5,"amount":100}`))
	if sameToGo(x, y) {
		t.Error("the two orders read alike")
	}
	for _, p := range [][2]string{{"9007199254740993", "9007199254740992"}, {"1", "2"}} {
		if sameToGo(goView(t, []byte(p[0])), goView(t, []byte(p[1]))) {
			t.Errorf("%s and %s read alike", p[0], p[1])
		}
	}
	for _, p := range [][2]string{{"1.0", "1"}, {"1e2", "100"}, {"-0", "0"}, {`{"a":[1,"x"]}`, ` { "a" : [ 1 , "\u0078" ] } `}} {
		if !sameToGo(goView(t, []byte(p[0])), goView(t, []byte(p[1]))) {
			t.Errorf("%s and %s read differently", p[0], p[1])
		}
	}
}
