package history_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/reliability/internal/history"
)

// testGrace is the cancel grace of the hand-written histories, whose
// clocks count in small steps.
const testGrace = 10

// Each file under testdata is a small story, named good-* or bad-*, whose
// first line says which anomaly kinds it must produce ("# want: none" for
// a history without any). Every kind must come out, and nothing else.
func TestHandWrittenHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no histories under testdata")
	}
	covered := map[history.Kind]bool{}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".jsonl"), func(t *testing.T) {
			want := wantKinds(t, path)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, err := history.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			r := history.Check(h, optionsOf(t, path))
			got := kindsOf(r)
			if !slices.Equal(got, want) {
				t.Errorf("kinds %v, want %v", got, want)
				for _, a := range r.Anomalies {
					t.Log(a)
				}
			}
			if strings.HasPrefix(filepath.Base(path), "good-") != (len(want) == 0) {
				t.Errorf("a good-* history must want no anomaly and a bad-* one some")
			}
			for _, k := range got {
				covered[k] = true
			}
		})
	}
	for _, k := range history.Kinds {
		if !covered[k] {
			t.Errorf("no history under testdata produces %s", k)
		}
	}
}

// wantKinds reads the "# want:" line of a history, sorted.
func wantKinds(t *testing.T, path string) []history.Kind {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "# want:")
		if !ok {
			continue
		}
		var kinds []history.Kind
		for _, w := range strings.Fields(rest) {
			if w != "none" {
				kinds = append(kinds, history.Kind(w))
			}
		}
		slices.Sort(kinds)
		return kinds
	}
	t.Fatalf("%s has no '# want:' line", path)
	return nil
}

// optionsOf reads the "# options:" line of a history, if any: name=value
// pairs in the history's time steps (wait-bound, retention, which applies
// to every key, and expiry-slack), over a cancel grace of testGrace.
func optionsOf(t *testing.T, path string) history.Options {
	t.Helper()
	o := history.Options{CancelGrace: testGrace}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# options:")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			name, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: option %q: %v", path, f, err)
			}
			d := time.Duration(n)
			switch name {
			case "wait-bound":
				o.WaitBound = d
			case "retention":
				o.Retention = func(string) time.Duration { return d }
			case "expiry-slack":
				o.ExpirySlack = d
			default:
				t.Fatalf("%s: unknown option %q", path, name)
			}
		}
	}
	return o
}

// kindsOf returns the distinct kinds of a report's anomalies, sorted.
func kindsOf(r *history.Report) []history.Kind {
	var ks []history.Kind
	for _, a := range r.Anomalies {
		if !slices.Contains(ks, a.Kind) {
			ks = append(ks, a.Kind)
		}
	}
	slices.Sort(ks)
	return ks
}

// openTestdata decodes one history under testdata.
func openTestdata(name string) (*history.History, error) {
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return history.Decode(f)
}
