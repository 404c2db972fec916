package history_test

import (
	"slices"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// The endings of a handler, as HTTP answers: a value here is status,
// headers and body, as the soak's client records them.
const (
	answer     = "201\nContent-Type: application/json\n\n{\"exec\":\"a/e1\"}"
	answerLate = "201\nContent-Type: application/json\nEtag: \"late\"\n\n{\"exec\":\"a/e1\"}"
	answer503  = "503\nContent-Type: application/json\n\n{\"exec\":\"a/e1\"}"
)

// ended is e with the name of its ending.
func ended(e history.Execution, ending string) history.Execution {
	e.Ending = ending
	return e
}

// released is a failed execution whose caller was answered val (a 5xx
// the handler wrote) before the key was released.
func released(e history.Execution, ending, val string) history.Execution {
	e = failed(e, ending)
	e.Ending, e.Value = ending, []byte(val)
	return e
}

func effects(f history.Final, ids ...string) history.Final {
	f.Effects = ids
	return f
}

func TestEndingStories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    history.History
		want []history.Kind
	}{
		{
			name: "a header set after WriteHeader reached the first caller but not the record",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, answerLate, "a/e1"),
					call("b/c1", "f", 200, 210, history.Replayed, answer, ""),
				},
				Execs:  []history.Execution{ended(run("a/e1", "a/c1", "f", 101, 110, answer), "late-header")},
				Finals: []history.Final{final(completed("f", answer), absent)},
			},
			want: []history.Kind{history.CorruptResult},
		},
		{
			name: "a replay with a header the record does not hold",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, answer, "a/e1"),
					call("b/c1", "f", 200, 210, history.Replayed, answerLate, ""),
				},
				Execs:  []history.Execution{ended(run("a/e1", "a/c1", "f", 101, 110, answer), "late-header")},
				Finals: []history.Final{final(completed("f", answer), absent)},
			},
			want: []history.Kind{history.CorruptResult},
		},
		{
			name: "the first caller and the replay got the record's bytes",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, answer, "a/e1"),
					call("b/c1", "f", 200, 210, history.Replayed, answer, ""),
				},
				Execs:  []history.Execution{ended(run("a/e1", "a/c1", "f", 101, 110, answer), "late-header")},
				Finals: []history.Final{final(completed("f", answer), absent)},
			},
		},
		{
			name: "a 503 replayed to a retry on another process",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.FnFailed, answer503, "a/e1"),
					call("b/c1", "f", 200, 210, history.FnFailed, answer503, ""),
				},
				Execs:  []history.Execution{released(run("a/e1", "a/c1", "f", 101, 110, ""), "5xx", answer503)},
				Finals: []history.Final{final(absent, absent)},
			},
			want: []history.Kind{history.ReplayedRelease},
		},
		{
			name: "a 503 replayed to a later retry on its own process",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.FnFailed, answer503, "a/e1"),
					call("a/c2", "f", 200, 210, history.FnFailed, answer503, ""),
				},
				Execs:  []history.Execution{released(run("a/e1", "a/c1", "f", 101, 110, ""), "5xx", answer503)},
				Finals: []history.Final{final(absent, absent)},
			},
			want: []history.Kind{history.ReplayedRelease},
		},
		{
			name: "a 503 shared with a duplicate that joined it in its process, then a retry ran again",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.FnFailed, answer503, "a/e1"),
					call("a/c2", "f", 105, 121, history.FnFailed, answer503, ""),
					call("b/c1", "f", 200, 230, history.Executed, "v", "b/e1"),
				},
				Execs: []history.Execution{
					released(run("a/e1", "a/c1", "f", 101, 110, ""), "5xx", answer503),
					ended(run("b/e1", "b/c1", "f", 201, 210, "v"), "kept"),
				},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
		},
		{
			name: "a streamed response replayed to a retry",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, answer, "a/e1"),
					call("b/c1", "f", 200, 210, history.Replayed, answer, ""),
				},
				Execs: []history.Execution{func() history.Execution {
					e := ended(run("a/e1", "a/c1", "f", 101, 110, answer), "stream")
					e.Tombstone = true
					return e
				}()},
				Finals: []history.Final{final(completed("f", "tombstone"), absent)},
			},
			want: []history.Kind{history.ReplayedRelease},
		},
		{
			name: "a streamed response: its first caller got the stream, the record holds a marker, the retry is refused",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, answer, "a/e1"),
					call("b/c1", "f", 200, 210, history.NotReplayable, "", ""),
				},
				Execs: []history.Execution{func() history.Execution {
					e := ended(run("a/e1", "a/c1", "f", 101, 110, answer), "stream")
					e.Tombstone = true
					return e
				}()},
				Finals: []history.Final{final(completed("f", "tombstone"), absent)},
			},
		},
		{
			name: "a streamed response whose only caller got the stream",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, answer, "a/e1")},
				Execs: []history.Execution{func() history.Execution {
					e := ended(run("a/e1", "a/c1", "f", 101, 110, answer), "stream")
					e.Tombstone = true
					return e
				}()},
				Finals: []history.Final{final(completed("f", "tombstone"), absent)},
			},
		},
		{
			name: "two executions of one key committed their side effect",
			h: history.History{
				Calls: []history.Call{
					call("b/c1", "f", 50, 70, history.FnFailed, "", "b/e1"),
					call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1"),
				},
				Execs: []history.Execution{
					released(run("b/e1", "b/c1", "f", 51, 60, ""), "tx-rollback-after", ""),
					ended(run("a/e1", "a/c1", "f", 101, 110, "v"), "tx-commit"),
				},
				Finals: []history.Final{effects(final(completed("f", "v"), absent), "a/e1", "b/e1")},
			},
			// b/e1 rolled back, yet its row committed: a stray effect as well.
			want: []history.Kind{history.DuplicateEffect, history.StrayEffect},
		},
		{
			name: "a rolled-back execution's effect committed, and nothing was stored",
			h: history.History{
				Calls:  []history.Call{call("a/c1", "f", 100, 120, history.OtherError, "", "a/e1")},
				Execs:  []history.Execution{released(run("a/e1", "a/c1", "f", 101, 110, ""), "tx-rollback", "")},
				Finals: []history.Final{effects(final(absent, absent), "a/e1")},
			},
			want: []history.Kind{history.StrayEffect},
		},
		{
			name: "one committed effect, the record holding its result",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.OtherError, "", "a/e1"),
					call("b/c1", "f", 200, 230, history.Executed, "v", "b/e1"),
					call("c/c1", "f", 300, 310, history.Replayed, "v", ""),
				},
				Execs: []history.Execution{
					released(run("a/e1", "a/c1", "f", 101, 110, ""), "tx-rollback", ""),
					ended(run("b/e1", "b/c1", "f", 201, 210, "v"), "tx-commit"),
				},
				Finals: []history.Final{effects(final(completed("f", "v"), completed("f", "v")), "b/e1")},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := history.Check(&tc.h, history.Options{CancelGrace: testGrace})
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := kindsOf(r); !slices.Equal(got, want) {
				t.Errorf("kinds %v, want %v", got, want)
				for _, a := range r.Anomalies {
					t.Log(a)
				}
			}
		})
	}
}

func TestSummaryCountsEndings(t *testing.T) {
	h := &history.History{Execs: []history.Execution{
		ended(run("a/e1", "a/c1", "f", 101, 110, "v"), "kept"),
		ended(run("a/e2", "a/c2", "f", 111, 120, "w"), "kept"),
		released(run("a/e3", "a/c3", "f", 121, 130, ""), "5xx", answer503),
		ended(run("a/e4", "a/c4", "f", 131, 0, ""), "kept"), // never ended
	}}
	s := history.Summarize(h)
	if s.Endings["kept"] != 2 || s.Endings["5xx"] != 1 || len(s.Endings) != 2 {
		t.Errorf("endings %v, want kept 2, 5xx 1", s.Endings)
	}
}
