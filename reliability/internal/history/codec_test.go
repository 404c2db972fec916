package history_test

import (
	"bytes"
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// sample is a history with one of everything the encoding carries: every
// outcome, binary and empty values, every completion, open and closed
// faults, finals with each stored state.
func sample() *history.History {
	h := &history.History{
		Calls: []history.Call{
			{ID: "n1/c1", Node: "n1", Key: "k1", Fingerprint: "f1", Invoke: 100, Return: 160, Outcome: history.Executed, Value: []byte("v1"), Exec: "n1/e1"},
			{ID: "n1/c2", Node: "n1", Key: "k1", Fingerprint: "f1", Invoke: 110, Return: 170, Outcome: history.Replayed, Value: []byte("v1")},
			{ID: "n2/c1", Node: "n2", Key: "k2", Fingerprint: "f\u00e9", Invoke: 120, Return: 180, Outcome: history.Executed, Value: []byte{0xff, 0x00, 0xfe}, Exec: "n2/e1"},
			{ID: "n2/c2", Node: "n2", Key: "k3", Fingerprint: "f", Invoke: 130},
		},
		Execs: []history.Execution{
			{ID: "n1/e1", Node: "n1", Call: "n1/c1", Key: "k1", Fingerprint: "f1", Token: "tok", Start: 105, End: 150, Value: []byte("v1"),
				Canceled: 140, Cause: "idem: lease lost", LeaseLost: true, Completion: history.CompletionAccepted, Completed: 155},
			{ID: "n2/e1", Node: "n2", Call: "n2/c1", Key: "k2", Fingerprint: "f\u00e9", Start: 125, End: 175, Value: []byte{0xff, 0x00, 0xfe}, Completion: history.CompletionPending},
			{ID: "n2/e2", Node: "n2", Call: "n2/c2", Key: "k3", Fingerprint: "f", Start: 135, End: 136, Failed: true, Err: "boom", Ending: "5xx"},
			{ID: "n2/e4", Node: "n2", Call: "n2/c2", Key: "k3", Fingerprint: "f", Start: 138, End: 139, Value: []byte("s"), Ending: "stream", Tombstone: true},
			{ID: "n2/e3", Node: "n2", Call: "n2/c2", Key: "k3", Fingerprint: "f", Start: 137, Completion: history.CompletionRefused},
		},
		Faults: []history.Fault{
			{ID: "x/f1", Kind: history.ProcessPause, Node: "n1", Start: 90, End: 95, Detail: "SIGSTOP"},
			{ID: "x/f2", Kind: "custom", Start: 96},
		},
		Finals: []history.Final{
			{Key: "k1", At: 900, SQL: history.Stored{State: history.Completed, Fingerprint: "f1", Value: []byte("v1")}, Redis: history.Stored{State: history.Absent}, Effects: []string{"n1/e1"}},
			{Key: "k2", At: 901, SQL: history.Stored{State: history.Completed, Fingerprint: "f\u00e9", Value: []byte{0xff, 0x00, 0xfe}}},
			{Key: "k3", At: 902, Expired: true, SQL: history.Stored{State: history.InProgress, Fingerprint: "f"}},
		},
	}
	// A value longer than Decode's read buffer, in a line of its own.
	big := []byte(strings.Repeat("0123456789abcdef", 20000))
	h.Execs = append(h.Execs, history.Execution{ID: "n4/e1", Node: "n4", Key: "k5", Fingerprint: "f", Start: 300, End: 310, Value: big})
	for o := history.Unknown; o <= history.OtherError; o++ {
		id := "n3/c" + o.String()
		c := history.Call{ID: id, Node: "n3", Key: "k4", Fingerprint: "f", Invoke: 200, Outcome: o, Err: "err " + o.String()}
		if o != history.Unknown {
			c.Return = 210
		} else {
			c.Err = ""
		}
		h.Calls = append(h.Calls, c)
	}
	return h
}

func encode(t *testing.T, h *history.History) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := h.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decode(t *testing.T, b []byte) *history.History {
	t.Helper()
	h, err := history.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// same reports whether two histories hold the same records, in any order.
func same(t *testing.T, got, want *history.History) {
	t.Helper()
	norm := func(h *history.History) history.History {
		n := history.History{
			Calls: slices.Clone(h.Calls), Execs: slices.Clone(h.Execs),
			Faults: slices.Clone(h.Faults), Finals: slices.Clone(h.Finals), Problems: h.Problems,
		}
		slices.SortFunc(n.Calls, func(a, b history.Call) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(n.Execs, func(a, b history.Execution) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(n.Faults, func(a, b history.Fault) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(n.Finals, func(a, b history.Final) int { return cmp.Compare(a.Key, b.Key) })
		return n
	}
	g, w := norm(got), norm(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("histories differ:\n got %+v\nwant %+v", g, w)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	h := sample()
	b := encode(t, h)
	got := decode(t, b)
	same(t, got, h)
	if got.Events != bytes.Count(b, []byte("\n")) || got.Truncated != 0 {
		t.Errorf("events %d, truncated %d; want %d, 0", got.Events, got.Truncated, bytes.Count(b, []byte("\n")))
	}
	if len(got.Problems) != 0 {
		t.Errorf("problems: %v", got.Problems)
	}
	// Readable values travel as text, others as base64.
	if !bytes.Contains(b, []byte(`"value":"v1"`)) || !bytes.Contains(b, []byte(`"value64":"/wD+"`)) {
		t.Errorf("values not encoded as text and base64:\n%s", b)
	}
	// Encoding the decoded history gives the same lines.
	if again := encode(t, got); !bytes.Equal(again, b) {
		t.Errorf("a second round differs:\n%s\n---\n%s", again, b)
	}
}

// A writer killed in the middle of a line leaves half of it without a
// newline: Decode drops it, counts it, and keeps everything before it.
func TestDecodeDropsTruncatedLastLine(t *testing.T) {
	b := encode(t, sample())
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty rest after the last newline
	last := lines[len(lines)-1]
	for cut := 1; cut < len(last)-1; cut += 7 {
		in := append(bytes.Join(lines[:len(lines)-1], nil), last[:cut]...)
		h, err := history.Decode(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if h.Truncated != 1 || h.Events != len(lines)-1 {
			t.Fatalf("cut at %d: %d events, %d truncated; want %d, 1", cut, h.Events, h.Truncated, len(lines)-1)
		}
	}
	// A complete last line without its newline is a line like any other.
	h := decode(t, bytes.TrimSuffix(b, []byte("\n")))
	if h.Truncated != 0 || h.Events != len(lines) {
		t.Errorf("no final newline: %d events, %d truncated; want %d, 0", h.Events, h.Truncated, len(lines))
	}
}

// Only the last line may be cut short: damage in the middle of a stream
// is an error that names the line.
func TestDecodeRejectsBrokenMiddleLine(t *testing.T) {
	b := encode(t, sample())
	in := bytes.Replace(b, []byte("\n"), []byte("\n{\"ev\":\"inv\n"), 1)
	_, err := history.Decode(bytes.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want one about line 2", err)
	}
}

func TestDecodeSkipsCommentsAndBlankLines(t *testing.T) {
	in := "# a story\n\n   \n{\"ev\":\"invoke\",\"id\":\"c\",\"node\":\"n\",\"key\":\"k\",\"fp\":\"f\",\"at\":1}\n# end\n"
	h := decode(t, []byte(in))
	if h.Events != 1 || len(h.Calls) != 1 {
		t.Fatalf("got %d events, %d calls; want 1, 1", h.Events, len(h.Calls))
	}
}

// Each process writes its own stream; the parent merges them. The parts of
// one record join up by ID whichever stream they came from.
func TestMergeJoinsStreams(t *testing.T) {
	h := sample()
	// Split the lines at random points into three streams.
	lines := bytes.SplitAfter(encode(t, h), []byte("\n"))
	var streams [3][]byte
	for i, l := range lines {
		streams[(i*7)%3] = append(streams[(i*7)%3], l...)
	}
	var parts []*history.History
	for _, s := range streams {
		parts = append(parts, decode(t, s))
	}
	got := history.Merge(parts...)
	same(t, got, h)
	if got.Events != len(lines)-1 {
		t.Errorf("events %d, want %d", got.Events, len(lines)-1)
	}
}

// An ID two processes both minted is a recorder bug: Merge keeps the first
// and reports a Problem, and Check a malformed history.
func TestMergeReportsReusedIDs(t *testing.T) {
	a := &history.History{Execs: []history.Execution{{ID: "e1", Node: "n1", Key: "k", Fingerprint: "f", Start: 10, End: 20}}}
	b := &history.History{Execs: []history.Execution{{ID: "e1", Node: "n2", Key: "k", Fingerprint: "f", Start: 30, End: 40}}}
	m := history.Merge(a, b)
	if len(m.Execs) != 1 || m.Execs[0].Node != "n1" || len(m.Problems) != 2 {
		t.Fatalf("merged %+v, problems %v; want the first execution and two problems (start, end)", m.Execs, m.Problems)
	}
	r := history.Check(m, history.Options{})
	if r.Count(history.Malformed) != 1 {
		t.Errorf("anomalies %v, want one malformed-history", r.Anomalies)
	}
}
