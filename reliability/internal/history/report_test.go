package history_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// An anomaly lists the faults that overlapped its calls and executions,
// and only those; a lost result also those until the stores were read.
func TestAnomalyNamesTheFaultsAroundIt(t *testing.T) {
	h := history.History{
		Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1")},
		Execs: []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
		Faults: []history.Fault{
			{ID: "before", Kind: history.RedisFlush, Start: 10, End: 99},
			{ID: "during", Kind: history.PostgresBlackhole, Start: 90, End: 105},
			{ID: "open", Kind: history.RedisPause, Start: 115},
			{ID: "later", Kind: history.SentinelFailover, Start: 500, End: 600},
			{ID: "after the read", Kind: history.RedisRestart, Start: 20000, End: 20001},
		},
		Finals: []history.Final{final(absent, absent)},
	}
	r := history.Check(&h, history.Options{})
	if len(r.Anomalies) != 1 {
		t.Fatalf("anomalies %v, want one lost-result", r.Anomalies)
	}
	var ids []string
	for _, f := range r.Anomalies[0].Faults {
		ids = append(ids, f.ID)
	}
	if want := []string{"during", "open", "later"}; !slices.Equal(ids, want) {
		t.Errorf("faults %v, want %v", ids, want)
	}
	if s := r.Anomalies[0].String(); !strings.Contains(s, "postgres-blackhole[during]") || !strings.Contains(s, "a/c1") {
		t.Errorf("String() = %q: want the faults and the call", s)
	}
}

func TestSummary(t *testing.T) {
	f, err := openTestdata("bad-stale-owner.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := history.Check(f, history.Options{CancelGrace: testGrace})
	s := r.Summary
	if s.Calls != 2 || s.Execs != 2 || s.Keys != 1 || s.Nodes != 2 || s.Finals != 1 ||
		s.Outcomes[history.Executed] != 1 || s.Outcomes[history.LeaseLost] != 1 ||
		s.Faults[history.ProcessPause] != 1 || s.Anomalies[history.StaleOwner] != 1 || r.Count(history.StaleOwner) != 1 {
		t.Errorf("summary %+v", s)
	}
	out := s.String()
	for _, want := range []string{"calls", "executed 1, lease-lost 1", "process-pause 1", "stale-owner 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary table lacks %q:\n%s", want, out)
		}
	}
}
