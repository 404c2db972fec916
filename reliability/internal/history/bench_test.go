package history_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// A larger history (thousands of keys, nodes and faults) checks clean,
// and survives its encoding. BenchmarkCheck runs the size of a soak.
func TestLargeHistory(t *testing.T) {
	g := generate(42, 2000)
	h := &g.h
	r := history.Check(h, history.Options{CancelGrace: genGrace})
	for i, a := range r.Anomalies {
		if i == 5 {
			break
		}
		t.Error(a)
	}
	back := decode(t, encode(t, h))
	if len(back.Calls) != len(h.Calls) || len(back.Execs) != len(h.Execs) || len(back.Problems) != 0 {
		t.Errorf("decoded %d calls and %d executions (problems %v), want %d and %d", len(back.Calls), len(back.Execs), back.Problems, len(h.Calls), len(h.Execs))
	}
	t.Logf("\n%s", r.Summary)
}

// BenchmarkCheck measures Check on generated histories of growing size:
// the time per call should stay flat.
func BenchmarkCheck(b *testing.B) {
	for _, keys := range []int{1600, 16000, 64000} {
		g := generate(7, keys)
		b.Run(fmt.Sprintf("calls=%d", len(g.h.Calls)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := history.Check(&g.h, history.Options{CancelGrace: genGrace}); !r.OK() {
					b.Fatal(r.Anomalies[0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(g.h.Calls)), "ns/call")
		})
	}
}

// BenchmarkDecode measures reading a history's JSON lines.
func BenchmarkDecode(b *testing.B) {
	g := generate(7, 16000)
	var buf bytes.Buffer
	if err := g.h.Encode(&buf); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("calls=%d", len(g.h.Calls)), func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(buf.Len()))
		for b.Loop() {
			if _, err := history.Decode(bytes.NewReader(buf.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
	})
}
