package main

import (
	"math"
	"strings"
	"testing"
)

// Ratios pair each impl with its path's floor run by run, invert
// throughputs, and leave out the time of a benchmark that reports a metric
// of its own.
func TestRatios(t *testing.T) {
	in := `goos: linux
BenchmarkA/op=x/impl=idem-2    100  300 ns/op  16 B/op  1 allocs/op
BenchmarkA/op=x/impl=floor-2   100  100 ns/op   0 B/op  0 allocs/op
BenchmarkJ/op=y/impl=paced-2     1  9000 ns/op  900 claims/s  15 p99-ms
BenchmarkJ/op=y/impl=none-2      1  5000 ns/op 1000 claims/s  10 p99-ms
BenchmarkA/op=x/impl=idem-2    100  400 ns/op  16 B/op  1 allocs/op
BenchmarkA/op=x/impl=floor-2   100  100 ns/op   0 B/op  0 allocs/op
BenchmarkA/op=x/impl=idem-2    100  200 ns/op  16 B/op  1 allocs/op
BenchmarkA/op=x/impl=floor-2   100  100 ns/op   0 B/op  0 allocs/op
BenchmarkS/path=p-2   10  5 ns/op  0.5 t16/t1
BenchmarkS/path=p-2   10  5 ns/op  0.7 t16/t1
`
	all, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	got := append(ratios(all, []string{"sec/op", "claims/s", "p99-ms"}), directs(all, []string{"t16/t1"})...)
	want := []ratio{
		{label: "A/op=x: idem ÷ floor", med: 3, low: 2, high: 4, runs: 3},
		{label: "J/op=y: paced ÷ none (claims/s)", med: 1000.0 / 900, low: 1000.0 / 900, high: 1000.0 / 900, runs: 1},
		{label: "J/op=y: paced ÷ none (p99-ms)", med: 1.5, low: 1.5, high: 1.5, runs: 1},
		{label: "S/path=p (t16/t1)", med: math.Sqrt(0.5 * 0.7), low: 0.5, high: 0.7, runs: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	var svg strings.Builder
	if err := draw(&svg, "t", got); err != nil || !strings.Contains(svg.String(), "3.00× (2.00–4.00, n=3)") {
		t.Fatalf("%v: %s", err, svg.String())
	}
}
