package fingerprint

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	name := func(s string) step { return step{kind: stepName, name: s} }
	anyName := step{kind: stepAnyName}
	elem := step{kind: stepElem}
	deep := step{kind: stepAnyDepth}
	tests := []struct {
		path string
		want []step
	}{
		{"amount", []step{name("amount")}},
		{"metadata.trace_id", []step{name("metadata"), name("trace_id")}},
		{"items[*].client_ts", []step{name("items"), elem, name("client_ts")}},
		{"matrix[*][*]", []step{name("matrix"), elem, elem}},
		{"[*].id", []step{elem, name("id")}},
		{"[*]", []step{elem}},
		{"*.nonce", []step{anyName, name("nonce")}},
		{"*[*]", []step{anyName, elem}},
		{"**.nonce", []step{deep, name("nonce")}},
		{"a.**.id", []step{name("a"), deep, name("id")}},
		{"a.**.**.id", []step{name("a"), deep, name("id")}},
		{"a.**", []step{name("a"), deep}},
		{`meta\.data`, []step{name("meta.data")}},
		{`a\[\*\]`, []step{name("a[*]")}},
		{`\*`, []step{name("*")}},
		{`back\\slash`, []step{name(`back\slash`)}},
		{"Ünïcode.ключ", []step{name("Ünïcode"), name("ключ")}},
		{"a b", []step{name("a b")}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := parsePath(tt.path)
			if err != nil {
				t.Fatalf("parsePath: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParsePathErrors(t *testing.T) {
	for _, path := range []string{
		"", ".", "a.", ".a", "a..b", "**", "**.**", "a[", "a[0]", "a[*", "a]", "a*", "*a", "**a", "***",
		"**[*]", `a\`, "a.[*]", "a[*]b", "a[*]x.y",
	} {
		t.Run(path, func(t *testing.T) {
			if steps, err := parsePath(path); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("parsePath(%q) = %+v, %v; want ErrInvalidPath", path, steps, err)
			}
			if b, err := New(WithDeny(path)); !errors.Is(err, ErrInvalidPath) || b != nil || !strings.Contains(err.Error(), "WithDeny") {
				t.Errorf("New with a bad deny path: %v", err)
			}
			if b, err := New(WithAllow(path)); !errors.Is(err, ErrInvalidPath) || b != nil || !strings.Contains(err.Error(), "WithAllow") {
				t.Errorf("New with a bad allow path: %v", err)
			}
		})
	}
}

// TestFilter pins what allow- and deny-lists keep, as doc.go describes.
func TestFilter(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		noDefault   bool
		in, want    string
	}{
		{name: "default deny at any depth",
			in:   `{"amount":5,"timestamp":1,"meta":{"trace_id":"t","traceId":"u","nonce":"n"},"items":[{"request_id":"r","sku":"a"}]}`,
			want: `{"amount":5,"items":[{"sku":"a"}],"meta":{}}`},
		{name: "default deny is case-sensitive",
			in:   `{"Timestamp":1,"TRACE_ID":2}`,
			want: `{"TRACE_ID":2,"Timestamp":1}`},
		{name: "default deny off", noDefault: true,
			in:   `{"timestamp":1,"nonce":2}`,
			want: `{"nonce":2,"timestamp":1}`},
		{name: "default deny off keeps custom", noDefault: true, deny: []string{"nonce"},
			in:   `{"timestamp":1,"nonce":2}`,
			want: `{"timestamp":1}`},
		{name: "deny dotted path", deny: []string{"metadata.sent_at"},
			in:   `{"sent_at":1,"metadata":{"sent_at":2,"x":3}}`,
			want: `{"metadata":{"x":3},"sent_at":1}`},
		{name: "deny in array elements", deny: []string{"items[*].client_ts"},
			in:   `{"items":[{"client_ts":1,"sku":"a"},{"sku":"b"}],"client_ts":9}`,
			want: `{"client_ts":9,"items":[{"sku":"a"},{"sku":"b"}]}`},
		{name: "name step does not reach into arrays", deny: []string{"items.client_ts"},
			in:   `{"items":[{"client_ts":1}]}`,
			want: `{"items":[{"client_ts":1}]}`},
		{name: "deny array element writes null", deny: []string{"tags[*]"},
			in:   `{"tags":["a","b"]}`,
			want: `{"tags":[null,null]}`},
		{name: "deny any member", deny: []string{"*.secret"},
			in:   `{"secret":0,"a":{"secret":1,"b":{"secret":2}}}`,
			want: `{"a":{"b":{"secret":2}},"secret":0}`},
		{name: "deny deep under a prefix", deny: []string{"a.**.id"},
			in:   `{"id":0,"a":{"id":1,"b":{"id":2},"c":[{"id":3}]}}`,
			want: `{"a":{"b":{},"c":[{}]},"id":0}`},
		{name: "deny whole subtree", deny: []string{"debug"},
			in:   `{"debug":{"x":[1,2]},"a":1}`,
			want: `{"a":1}`},
		{name: "deny top-level array elements' field", deny: []string{"[*].ts"},
			in:   `[{"ts":1,"v":1},{"ts":2,"v":2}]`,
			want: `[{"v":1},{"v":2}]`},
		{name: "escaped key matches", deny: []string{"secret"},
			in:   `{"\u0073ecret":1,"b":2}`,
			want: `{"b":2}`},
		{name: "allow top-level fields", allow: []string{"amount", "currency"},
			in:   `{"amount":5,"currency":"EUR","note":"hi","meta":{"a":1}}`,
			want: `{"amount":5,"currency":"EUR"}`},
		{name: "allow keeps whole subtrees", allow: []string{"customer"},
			in:   `{"customer":{"id":1,"name":"x","trace_id":"t"},"other":1}`,
			want: `{"customer":{"id":1,"name":"x"}}`},
		{name: "allow nested field", allow: []string{"customer.id"},
			in:   `{"customer":{"id":1,"name":"x"},"other":1}`,
			want: `{"customer":{"id":1}}`},
		{name: "allow drops objects where nothing counts", allow: []string{"customer.id"},
			in:   `{"customer":{"name":"x"}}`,
			want: `{}`},
		{name: "allow drops a scalar on the way", allow: []string{"customer.id"},
			in:   `{"customer":"x"}`,
			want: `{}`},
		{name: "allow keeps array positions", allow: []string{"items[*].sku"},
			in:   `{"items":[{"sku":"a","qty":1},{"qty":2},"x",{"sku":"c"}]}`,
			want: `{"items":[{"sku":"a"},null,null,{"sku":"c"}]}`},
		{name: "allow drops empty arrays", allow: []string{"items[*].sku"},
			in:   `{"items":[]}`,
			want: `{}`},
		{name: "allow counts items even without the field", allow: []string{"items.sku"},
			in:   `{"items":[{"sku":"a"}]}`,
			want: `{"items":[null]}`},
		{name: "allow at any depth", allow: []string{"**.id"},
			in:   `{"id":1,"a":{"id":2,"x":3},"b":[{"id":4},{"y":5}],"c":7}`,
			want: `{"a":{"id":2},"b":[{"id":4},null],"id":1}`},
		{name: "deny wins inside allow", allow: []string{"customer"}, deny: []string{"customer.name"},
			in:   `{"customer":{"id":1,"name":"x"}}`,
			want: `{"customer":{"id":1}}`},
		{name: "deny wins over the same allow", allow: []string{"a", "b"}, deny: []string{"a"},
			in:   `{"a":1,"b":2}`,
			want: `{"b":2}`},
		{name: "allow root scalar", allow: []string{"a"},
			in:   `42`,
			want: `null`},
		{name: "allow root array", allow: []string{"[*].id"},
			in:   `[{"id":1,"x":2},{"x":3}]`,
			want: `[{"id":1},null]`},
		{name: "allow with nothing at root", allow: []string{"a"},
			in:   `{"b":1}`,
			want: `{}`},
		{name: "allow any name", allow: []string{"*.id"},
			in:   `{"a":{"id":1,"x":1},"b":{"x":2},"id":0}`,
			want: `{"a":{"id":1}}`},
		{name: "allow elements of nested arrays", allow: []string{"m[*][*]"},
			in:   `{"m":[[1,2],[3]],"n":1}`,
			want: `{"m":[[1,2],[3]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(t, WithAllow(tt.allow...), WithDeny(tt.deny...), WithDefaultDeny(!tt.noDefault))
			got, err := b.Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			// The digest is the digest of that canonical form.
			d1, err1 := b.Sum([]byte(tt.in))
			d2, err2 := newBuilder(t, WithDefaultDeny(false)).Sum(got)
			if err1 != nil || err2 != nil || d1 != d2 {
				t.Errorf("Sum of the body and of its filtered form differ: %s %v, %s %v", d1, err1, d2, err2)
			}
		})
	}
}

// pathStep is one step of a concrete path into a body: a member name, or an
// array element when elem is true.
type pathStep struct {
	name string
	elem bool
}

// matchRef is the obvious recursive matcher, the reference for the NFA.
func matchRef(steps []step, path []pathStep) bool {
	if len(steps) == 0 {
		return len(path) == 0
	}
	if steps[0].kind == stepAnyDepth {
		return matchRef(steps[1:], path) || (len(path) > 0 && matchRef(steps, path[1:]))
	}
	if len(path) == 0 {
		return false
	}
	ok := false
	switch steps[0].kind {
	case stepName:
		ok = !path[0].elem && path[0].name == steps[0].name
	case stepAnyName:
		ok = !path[0].elem
	case stepElem:
		ok = path[0].elem
	}
	return ok && matchRef(steps[1:], path[1:])
}

// TestMatchAgainstReference walks random paths through the NFA of random
// patterns and compares every verdict with matchRef.
func TestMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	segs := []string{"a", "b", "*", "**", "a[*]", "*[*]", "b[*][*]"}
	for range 3000 {
		var srcs []string
		for range rng.IntN(3) + 1 {
			var parts []string
			for range rng.IntN(4) + 1 {
				parts = append(parts, segs[rng.IntN(len(segs))])
			}
			srcs = append(srcs, strings.Join(parts, "."))
		}
		var valid []string
		for _, s := range srcs {
			if _, err := parsePath(s); err == nil {
				valid = append(valid, s)
			}
		}
		f, err := compileFilter(nil, valid, true)
		if err != nil {
			t.Fatal(err)
		}
		var path []pathStep
		for range rng.IntN(6) {
			if rng.IntN(3) == 0 {
				path = append(path, pathStep{elem: true})
			} else {
				path = append(path, pathStep{name: []string{"a", "b", "c"}[rng.IntN(3)]})
			}
		}
		// Walk the NFA along the path, as fvalue does.
		var w work
		w.states = append(w.states, f.root...)
		lo, hi := 0, len(w.states)
		denied := false
		for _, st := range path {
			if !st.elem && f.denied([]byte(st.name)) {
				denied = true
				break
			}
			mark := len(w.states)
			w.advance(f, lo, hi, st.elem, []byte(st.name), false)
			lo, hi = mark, len(w.states)
			if d, _, _ := w.classify(f, lo, hi); d {
				denied = true
				break
			}
		}
		want := false
		for _, s := range valid {
			steps, _ := parsePath(s)
			for k := 1; k <= len(path); k++ {
				if matchRef(steps, path[:k]) {
					want = true
				}
			}
		}
		if denied != want {
			t.Fatalf("patterns %q, path %+v: NFA says %v, reference %v", valid, path, denied, want)
		}
	}
}
