package fingerprint

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// streamConfig is one way canonical may be asked to read a body.
type streamConfig struct {
	name     string
	mode     mode
	maxDepth int
	filter   *filter
}

// streamConfigs are the readings the stream writer serves, each compared
// with the token tree: RFC 8785 alone, a Builder's reading with and without
// case-sensitive names, with no filter, the default deny-list, and deny
// names that real bodies and the generator's hold, and a small depth limit.
func streamConfigs(tb testing.TB) []streamConfig {
	tb.Helper()
	names := func(deny ...string) *filter {
		f, err := compileFilter(nil, deny, true)
		if err != nil {
			tb.Fatal(err)
		}
		if len(f.pats) != 0 {
			tb.Fatalf("deny paths %q are not names alone", deny)
		}
		return f
	}
	def := names(DefaultDeny()...)
	some := names("**.a", "**.K", "**.amount", "**.é", "**.\U0001F600", "**.items")
	var cs []streamConfig
	for _, m := range []struct {
		name string
		mode mode
	}{{"rfc8785", 0}, {"builder", exactInts | foldNames}, {"case-sensitive", exactInts}} {
		cs = append(cs,
			streamConfig{m.name + "/none", m.mode, DefaultMaxDepth, nil},
			streamConfig{m.name + "/default-deny", m.mode, DefaultMaxDepth, def},
			streamConfig{m.name + "/deny-names", m.mode, DefaultMaxDepth, some},
			streamConfig{m.name + "/depth-3", m.mode, 3, some},
		)
	}
	return cs
}

// checkStream compares the stream writer with the token tree, the oracle,
// on in under every configuration: the same output byte for byte, or the
// same error, message and offset included.
func checkStream(t *testing.T, cs []streamConfig, in []byte) {
	t.Helper()
	checkStreamKeeping(t, cs, in, nil)
}

// checkStreamKeeping is checkStream with, when kept is not nil, the
// stream writer's work for each configuration kept from one call to the
// next (kept[i] for cs[i]), as one pooled work serves body after body in
// one mode, so that what it remembers of a body meets the next.
func checkStreamKeeping(t *testing.T, cs []streamConfig, in []byte, kept []*work) {
	t.Helper()
	for i, c := range cs {
		ws, wt := getWork(), getWork()
		if kept != nil {
			if kept[i] == nil {
				kept[i] = new(work)
			}
			putWork(ws)
			ws = kept[i]
			ws.out = ws.out[:0]
		}
		// Something already in the buffer, as a Builder's framing is.
		ws.out = append(ws.out, "prefix"...)
		wt.out = append(wt.out, "prefix"...)
		serr := ws.stream(in, c.maxDepth, c.filter, c.mode)
		terr := wt.tokens(in, c.maxDepth, c.filter, c.mode)
		switch {
		case (serr == nil) != (terr == nil):
			t.Fatalf("%s: %q: stream error %v, token tree error %v", c.name, in, serr, terr)
		case serr != nil && serr.Error() != terr.Error():
			t.Fatalf("%s: %q: stream error %q, token tree error %q", c.name, in, serr, terr)
		case serr == nil && !bytes.Equal(ws.out, wt.out):
			t.Fatalf("%s: %q:\nstream     %q\ntoken tree %q", c.name, in, ws.out, wt.out)
		}
		if kept == nil {
			putWork(ws)
		}
		putWork(wt)
	}
}

var streamSeeds = []string{
	`{"b":1,"a":2}`,
	`{"a":1,"b":2,"c":{"z":[],"y":{}},"d":[{"n":1,"m":2},{"m":3}]}`,
	`{"nonce":1,"a":{"nonce":{"x":1,"x":2}}}`,
	`{"trace_id":1,"trace_id":2}`,
	`{"timestamp":"x","Timestamp":"y"}`,
	`{"a":1,"b":2,"a":3}`,
	`{"b":1,"a":2,"b":3}`,
	`{"z":1,"nonce":2}`,
	`{"nonce":2,"z":1}`,
	`{"nonce":2}`,
	`[{"nonce":2},{"nonce":1,"a":0}]`,
	`{"\ue000":1,"\ud83d\ude00":2,"a":3}`,
	`{"a\u0000":1,"a":2}`,
	`{"A":1,"a":2}`,
	`{"k":1,"\u212a":2}`,
	`{"é":1,"É":2}`,
	`{"a":{"b":{"c":{"d":1}}}}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"A":0}`,
	`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16,"a":17,"Q":0}`,
	`{"q":1,"p":2,"o":3,"n":4,"m":5,"l":6,"k":7,"j":8,"i":9,"h":10,"g":11,"f":12,"e":13,"d":14,"c":15,"b":16,"a":17,"b":0}`,
	`{"b":1,"a":2,"c":`,
	`{"b":1,"a":2 "c":3}`,
	`{"b":1,"a"`,
	`{"b":1,"a":2,}`,
	` [1, 2.50, -0, 1e400 ]`,
	`{"amount":9007199254740993,"a":[1E2,0.0001,1e-7,123456789012345678]}`,
}

// FuzzStream compares the stream writer with the token tree on any input.
func FuzzStream(f *testing.F) {
	for _, s := range append(append(streamSeeds, fuzzSeeds...), goSeeds...) {
		f.Add([]byte(s))
	}
	f.Add(paymentJSON(1 << 10))
	cs := streamConfigs(f)
	kept := make([]*work, len(cs))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkStream(t, cs, in)
		checkStreamKeeping(t, cs, in, kept)
	})
}

// TestStreamMatchesTokens runs the comparison on the seeds, on every
// prefix of a payment body (every way it can end too early), and on random
// trees in random member orders and spellings.
func TestStreamMatchesTokens(t *testing.T) {
	cs := streamConfigs(t)
	for _, s := range append(append(streamSeeds, fuzzSeeds...), goSeeds...) {
		checkStream(t, cs, []byte(s))
	}
	for _, size := range paymentSizes {
		checkStream(t, cs, paymentJSON(size.n))
	}
	body := paymentJSON(1 << 10)
	for n := range len(body) {
		checkStream(t, cs, body[:n])
	}
	g := jsonGen{rand.New(rand.NewPCG(7, 8))}
	for range 3000 {
		var b strings.Builder
		g.write(&b, g.value(0))
		checkStream(t, cs, []byte(b.String()))
	}
}

// TestStreamShapesOutliveABody feeds one work body after body, as the pool
// does, with objects whose names come in the same order as an earlier
// body's, the same names spelled apart, and a mode that changes what those
// names mean.
func TestStreamShapesOutliveABody(t *testing.T) {
	cs := streamConfigs(t)
	kept := make([]*work, len(cs))
	bodies := []string{
		`{"b":1,"a":2,"A":3}`, // ambiguous only in the builder's mode
		`{"b":1,"a":2,"A":3}`,
		`{"b":1,"a":2,"a":3}`,
		`{"b":1,"a":2,"\u0041":3}`,
		`{"b":1,"a":2,"c":3}`,
		`{"b":{"y":1,"x":2},"a":[{"y":1,"x":2},{"y":1,"x":2,"x":3}]}`,
		`{"b":{"y":1,"x":2},"a":[{"y":1,"x":2},{"y":1,"X":2}]}`,
		`{"name_longer_than_8":1,"name_longer_than_7":2}`,
		`{"name_longer_than_8":1,"name_longer_than_8":2}`,
		`{"name_longer_than_8":1,"name_longer_than_\u0038":2}`,
	}
	// One work for every configuration, so every mode in turn, as when
	// two Builders and Canonicalize share the pool.
	shared := slices.Repeat([]*work{new(work)}, len(cs))
	for range 2 {
		for _, b := range bodies {
			checkStreamKeeping(t, cs, []byte(b), kept)
			checkStreamKeeping(t, cs, []byte(b), shared)
		}
	}
	g := jsonGen{rand.New(rand.NewPCG(9, 10))}
	for range 2000 {
		var b strings.Builder
		g.write(&b, g.value(0))
		checkStreamKeeping(t, cs, []byte(b.String()), kept)
	}
}

// runSeeds are bodies at the edges of the stream writer's pending run
// (see streamValue): whitespace wherever it may stand, members dropped
// first, in the middle, last and all of them, in objects put in order and
// not, escapes RFC 8785 writes as they are and escapes it rewrites, UTF-8
// of every length, and numbers canonical as written next to numbers that
// are not.
var runSeeds = []string{
	" { \"b\" : 1 , \"a\" : [ 1 , 2 ] , \"c\" : { } , \"d\" : [ ] } ",
	"\t{\r\n\"nonce\"\n:\n1\n}\n",
	`{"nonce":1,"b":2,"a":3}`,
	`{"b":2,"nonce":1,"a":3}`,
	`{"b":2,"a":3,"nonce":1}`,
	`{"nonce":1,"trace_id":2}`,
	`{"a":1,"nonce":{"y":[1,"\/"],"x":2},"b":1.50}`,
	`{"z":{"nonce":1},"y":[{"nonce":1}, {"nonce":1,"a":1e2}]}`,
	`["\"\\\b\f\n\r\t", "\/", "a\/b\u00e9c", "\u0041\u001f\u001F", "\ud83d\ude00x"]`,
	"[\"é\", \"東京\", \"\U0001F600\", \"\xc3\", \"\xe2\x82\", \"\xed\xa0\x80\", \"\xe0\x80\x80\", \"\xf4\x90\x80\x80\", \"\xc0\xaf\"]",
	`{"n\u0061me":1,"name2":2,"\/":3, "a" :4}`,
	`{"longer_than_eight":1,"long_name_\u00e9":2,"long_name_é":3}`,
	`[0,-0,-1,1.5,-1.5,0.5,-0.5,0.0,1.0,0.000001,0.0000001,1e2,1E+2,-1e-2,123456789012345,1234567890123456,12345678901234.5,1234567890123.45,0.123456789012345,0.1234567890123456]`,
	`[01, 1.]`, `[-]`, `[1.e2]`, `[1e]`, `[--1]`, `[1x]`, `[0x1]`, `[-01]`,
	`[1,2`, `[1,2,`, `[1.5`, `[1e5`, `["ab`, `["a\`, `["a\u12`, `{"a"`, `{"a":`, `{"a" `, `{"é`,
	`[tru]`, `[nul`, `[fals`, `[true,false,null]`,
}

// TestStreamRuns compares the stream writer with the token tree on
// runSeeds and on every prefix of each.
func TestStreamRuns(t *testing.T) {
	cs := streamConfigs(t)
	for _, s := range runSeeds {
		for n := range len(s) + 1 {
			checkStream(t, cs, []byte(s[:n]))
		}
	}
}
