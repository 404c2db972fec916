// Command chart draws, from `go test -bench` output, each path's ratio to
// its floor with its spread, as an SVG:
//
//	go run ./bench/cmd/chart -o docs/benchmarks.svg bench/perf.txt
//
// A benchmark's path is its name without its impl=… element; its floor is
// the first of impl=floor, impl=peer, impl=none and impl=baseline that the
// output holds for the same path. For each other impl, and for each unit
// asked for (-units), the ratio is taken run by run — the i-th result of
// the impl against the i-th of its floor, as the interleaved -count 1 loops
// of docs/benchmarks.md write them — so that a change of the machine's load
// between runs falls on both alike. The chart shows the median of those
// ratios as a dot and their range as a bar, on a log scale on which 1 is the
// floor. A ratio is a cost: time and other "lower is better" units divide
// the impl by its floor, throughputs (a unit ending in "/s") the floor by
// the impl, so that above 1 is always worse than the floor. A unit that is
// a ratio already (-direct, such as t16/t1: an op's time at 16 goroutines
// over its time at 1) is drawn as it is, its median and range over the
// runs.
package main
