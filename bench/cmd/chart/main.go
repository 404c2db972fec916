package main

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// floors are the impls a path is measured against, first found first.
var floors = []string{"floor", "peer", "none", "baseline"}

// series is the results of one benchmark (path and impl) in one unit, in
// the order of the runs.
type series struct {
	path, impl, unit string
	values           []float64
}

// ratio is one line of the chart.
type ratio struct {
	label          string
	med, low, high float64
	runs           int
}

func main() {
	out := flag.String("o", "", "the SVG to write (default: standard output)")
	units := flag.String("units", "sec/op,claims/s,p99-ms", "the units to draw against a floor, comma-separated (ns/op is sec/op)")
	direct := flag.String("direct", "t16/t1", "the units that are ratios already, drawn as they are, comma-separated")
	title := flag.String("title", "Each path's cost against its floor (median of the runs, bar: their range)", "the chart's title")
	flag.Parse()
	var in []io.Reader
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	all, err := parse(io.MultiReader(in...))
	if err != nil {
		fail(err)
	}
	lines := append(ratios(all, strings.Split(*units, ",")), directs(all, strings.Split(*direct, ","))...)
	if len(lines) == 0 {
		fail(fmt.Errorf("no benchmark with an impl and its floor (%s) in the input", strings.Join(floors, ", ")))
	}
	w := os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fail(err)
		}
		defer func() {
			if err := f.Close(); err != nil {
				fail(err)
			}
		}()
		w = f
	}
	if err := draw(w, *title, lines); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chart:", err)
	os.Exit(1)
}

// parse reads benchmark result lines: a name (with its -GOMAXPROCS
// suffix), the iterations, then value and unit pairs.
func parse(r io.Reader) (map[[3]string]*series, error) {
	all := map[[3]string]*series{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		path, impl := splitImpl(name)
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", sc.Text(), err)
			}
			unit := f[i+1]
			if unit == "ns/op" {
				unit, v = "sec/op", v/1e9
			}
			k := [3]string{path, impl, unit}
			s := all[k]
			if s == nil {
				s = &series{path: path, impl: impl, unit: unit}
				all[k] = s
			}
			s.values = append(s.values, v)
		}
	}
	return all, sc.Err()
}

// splitImpl returns name without its impl=… element, and the impl.
func splitImpl(name string) (path, impl string) {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if v, ok := strings.CutPrefix(p, "impl="); ok {
			return strings.Join(slices.Delete(parts, i, i+1), "/"), v
		}
	}
	return name, ""
}

// ratios pairs each impl with its path's floor, run by run, in each unit.
func ratios(all map[[3]string]*series, units []string) []ratio {
	var keys [][3]string
	for k := range all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [3]string) int {
		return strings.Compare(a[0]+"\x00"+a[2]+"\x00"+a[1], b[0]+"\x00"+b[2]+"\x00"+b[1])
	})
	var out []ratio
	for _, k := range keys {
		s := all[k]
		if !slices.Contains(units, s.unit) || s.unit == "sec/op" && hasMetric(all, s, units) {
			continue
		}
		var ref *series
		for _, f := range floors {
			if r := all[[3]string{s.path, f, s.unit}]; r != nil {
				ref = r
				break
			}
		}
		if ref == nil || ref == s || s.impl == "" || slices.Contains(floors, s.impl) && slices.Index(floors, s.impl) < slices.Index(floors, ref.impl) {
			continue
		}
		n := min(len(s.values), len(ref.values))
		var rs []float64
		for i := range n {
			a, b := s.values[i], ref.values[i]
			if strings.HasSuffix(s.unit, "/s") {
				a, b = b, a
			}
			if b > 0 && a > 0 {
				rs = append(rs, a/b)
			}
		}
		if len(rs) == 0 {
			continue
		}
		slices.Sort(rs)
		med := median(rs)
		label := strings.TrimPrefix(s.path, "Benchmark") + ": " + s.impl + " ÷ " + ref.impl
		if s.unit != "sec/op" {
			label += " (" + s.unit + ")"
		}
		out = append(out, ratio{label: label, med: med, low: rs[0], high: rs[len(rs)-1], runs: len(rs)})
	}
	return out
}

// directs returns the results in units that are ratios already (a cost
// against another measure of the same run, such as t16/t1), as lines of
// their own.
func directs(all map[[3]string]*series, units []string) []ratio {
	var out []ratio
	for _, s := range all {
		if !slices.Contains(units, s.unit) || len(s.values) == 0 {
			continue
		}
		rs := slices.Sorted(slices.Values(s.values))
		label := strings.TrimPrefix(s.path, "Benchmark") + ": " + s.impl + " (" + s.unit + ")"
		if s.impl == "" {
			label = strings.TrimPrefix(s.path, "Benchmark") + " (" + s.unit + ")"
		}
		out = append(out, ratio{label: label, med: median(rs), low: rs[0], high: rs[len(rs)-1], runs: len(rs)})
	}
	slices.SortFunc(out, func(a, b ratio) int { return strings.Compare(a.label, b.label) })
	return out
}

// median returns the median of sorted rs, the geometric mean of the two
// middle ones for an even count.
func median(rs []float64) float64 {
	if len(rs)%2 == 0 {
		return math.Sqrt(rs[len(rs)/2-1] * rs[len(rs)/2])
	}
	return rs[len(rs)/2]
}

// hasMetric reports whether s's benchmark reports a unit of units other
// than its time, which then stands for it: the time of an op that is a
// whole measured window (BenchmarkJanitor) says nothing.
func hasMetric(all map[[3]string]*series, s *series, units []string) bool {
	for _, u := range units {
		if u != "sec/op" && all[[3]string{s.path, s.impl, u}] != nil {
			return true
		}
	}
	return false
}

// draw writes the chart: one row a ratio, on a log scale.
func draw(w io.Writer, title string, lines []ratio) error {
	lo, hi := 1.0, 1.0
	for _, l := range lines {
		lo, hi = math.Min(lo, l.low), math.Max(hi, l.high)
	}
	lo, hi = math.Pow(2, math.Floor(math.Log2(lo))), math.Pow(2, math.Ceil(math.Log2(hi)))
	const (
		labelW, plotW, valueW = 560, 420, 190
		rowH, top, bottom     = 20, 48, 34
	)
	width, height := labelW+plotW+valueW, top+rowH*len(lines)+bottom
	x := func(v float64) float64 {
		return labelW + plotW*(math.Log(v)-math.Log(lo))/(math.Log(hi)-math.Log(lo))
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="8" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	for v := lo; v <= hi*1.0001; v *= 2 {
		stroke := "#ddd"
		if v == 1 {
			stroke = "#555"
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(v), top-6, x(v), top+rowH*len(lines), stroke)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s×</text>`+"\n", x(v), top+rowH*len(lines)+16, strconv.FormatFloat(v, 'g', 4, 64))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">1 = the floor; right of it costs more (log scale)</text>`+"\n", x(math.Sqrt(lo*hi)), top+rowH*len(lines)+30)
	for i, l := range lines {
		y := top + rowH*i + rowH/2
		if i%2 == 0 {
			fmt.Fprintf(b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f6f6"/>`+"\n", y-rowH/2, width, rowH)
		}
		fmt.Fprintf(b, `<text x="8" y="%d">%s</text>`+"\n", y+4, html.EscapeString(l.label))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#4477aa" stroke-width="3"/>`+"\n", x(l.low), y, x(l.high), y)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%d" r="4" fill="#cc3311"/>`+"\n", x(l.med), y)
		fmt.Fprintf(b, `<text x="%d" y="%d">%.2f× (%.2f–%.2f, n=%d)</text>`+"\n", labelW+plotW+10, y+4, l.med, l.low, l.high, l.runs)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
