package history_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// A small vocabulary for stories on key "k": the node is the part of an ID
// before the slash.

func nodeOf(id string) string { n, _, _ := strings.Cut(id, "/"); return n }

// call is a call of key k for fingerprint fp; exec names the execution it
// ran, if any.
func call(id, fp string, inv, ret int64, out history.Outcome, val string, exec string) history.Call {
	c := history.Call{ID: id, Node: nodeOf(id), Key: "k", Fingerprint: fp, Invoke: inv, Return: ret, Outcome: out, Exec: exec}
	if val != "" {
		c.Value = []byte(val)
	}
	return c
}

// run is a successful execution of key k for call c.
func run(id, c, fp string, start, end int64, val string) history.Execution {
	return history.Execution{ID: id, Node: nodeOf(id), Call: c, Key: "k", Fingerprint: fp, Start: start, End: end, Value: []byte(val)}
}

func failed(e history.Execution, err string) history.Execution {
	e.Failed, e.Err, e.Value = true, err, nil
	return e
}

func canceled(e history.Execution, at int64) history.Execution {
	e.Canceled, e.Cause, e.LeaseLost = at, "idem: lease lost", true
	return e
}

func completion(e history.Execution, c history.Completion, at int64) history.Execution {
	e.Completion, e.Completed = c, at
	return e
}

// streamStory: p/e1 streams its caller a response, and its tombstone is
// refused; a/e1 runs the key again, and its result is kept.
func streamStory(faults ...history.Fault) history.History {
	return history.History{
		Calls: []history.Call{
			call("p/c1", "f", 100, 520, history.Executed, "s", "p/e1"),
			call("a/c1", "f", 300, 320, history.Executed, "w", "a/e1"),
		},
		Execs: []history.Execution{
			completion(streamed(run("p/e1", "p/c1", "f", 101, 105, "s")), history.CompletionRefused, 510),
			run("a/e1", "a/c1", "f", 301, 310, "w"),
		},
		Faults: faults,
		Finals: []history.Final{final(completed("f", "w"), absent)},
	}
}

// streamed makes e a stream: its result its own caller's only.
func streamed(e history.Execution) history.Execution {
	e.Ending, e.Tombstone = "stream", true
	return e
}

func pause(node string, from, to int64) history.Fault {
	return history.Fault{ID: "nem/" + node + "-pause", Kind: history.ProcessPause, Node: node, Start: from, End: to}
}

func final(sql, redis history.Stored) history.Final {
	return history.Final{Key: "k", At: 10000, SQL: sql, Redis: redis}
}

func completed(fp, v string) history.Stored {
	return history.Stored{State: history.Completed, Fingerprint: fp, Value: []byte(v)}
}

var absent = history.Stored{State: history.Absent}

func TestStories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    history.History
		want []history.Kind
	}{
		{
			name: "a mismatch while another request held the key, which then failed and let the first fingerprint win",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "g", 100, 130, history.FnFailed, "", "a/e1"),
					call("b/c1", "f", 110, 111, history.Mismatch, "", ""),
					call("b/c2", "f", 200, 220, history.Executed, "v", "b/e1"),
				},
				Execs:  []history.Execution{failed(run("a/e1", "a/c1", "g", 101, 129, ""), "boom"), run("b/e1", "b/c2", "f", 201, 210, "v")},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
		},
		{
			name: "a mismatch on a key no other request had used",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 101, history.Mismatch, "", "")},
			},
			want: []history.Kind{history.RefusedRetry},
		},
		{
			name: "no final states read: durability is not checked",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1")},
				Execs: []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
			},
		},
		{
			name: "an owner killed mid-work, then a retry takes over",
			h: history.History{
				Calls: []history.Call{
					call("x/c1", "f", 100, 0, history.Unknown, "", ""),
					call("a/c1", "f", 400, 420, history.Executed, "v", "a/e1"),
				},
				Execs:  []history.Execution{{ID: "x/e1", Node: "x", Call: "x/c1", Key: "k", Fingerprint: "f", Start: 101}, run("a/e1", "a/c1", "f", 401, 410, "v")},
				Faults: []history.Fault{{ID: "nem/kill", Kind: history.ProcessKill, Node: "x", Start: 150}},
				Finals: []history.Final{final(completed("f", "v"), completed("f", "v"))},
			},
		},
		{
			name: "a caller gave up; the work completed and a retry replays it",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 102, history.Canceled, "", "a/e1"),
					call("b/c1", "f", 300, 301, history.Replayed, "v", ""),
				},
				Execs:  []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
		},
		{
			name: "a stream whose owner was stopped past its lease before its tombstone, then a takeover",
			h:    streamStory(pause("p", 110, 500)),
			// The documented limit of a streamed response: it left before
			// its tombstone, which the stopped owner never stored.
		},
		{
			name: "a stream whose tombstone was refused with no stop of its owner, then another run",
			h:    streamStory(),
			want: []history.Kind{history.DuplicateExecution},
		},
		{
			name: "a stale owner's completion accepted after the takeover",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 600, history.Canceled, "", "p/e1"),
					call("a/c1", "f", 200, 260, history.Executed, "w", "a/e1"),
				},
				Execs: []history.Execution{
					completion(run("p/e1", "p/c1", "f", 101, 510, "v"), history.CompletionAccepted, 520),
					run("a/e1", "a/c1", "f", 250, 255, "w"),
				},
				Faults: []history.Fault{pause("p", 110, 500)},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
			// Two results out (w delivered, v kept), and the fence that
			// should have refused v failed; SQL lost what a/c1 was told.
			want: []history.Kind{history.DuplicateExecution, history.LostResult, history.StaleOwner},
		},
		{
			name: "a paused owner's caller told success while its completion was pending, and the takeover failed",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 505, history.Executed, "v", "p/e1"),
					call("a/c1", "f", 200, 260, history.FnFailed, "", "a/e1"),
				},
				Execs: []history.Execution{
					completion(canceled(run("p/e1", "p/c1", "f", 101, 503, "v"), 501), history.CompletionPending, 0),
					failed(run("a/e1", "a/c1", "f", 250, 255, ""), "declined"),
				},
				Faults: []history.Fault{pause("p", 110, 500)},
				Finals: []history.Final{final(absent, absent)},
			},
			want: []history.Kind{history.LostResult, history.StaleOwner},
		},
		{
			name: "a completion accepted after another owner had started",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Canceled, "", "a/e1"),
					call("b/c1", "f", 200, 230, history.FnFailed, "", "b/e1"),
				},
				Execs: []history.Execution{
					completion(run("a/e1", "a/c1", "f", 101, 150, "v"), history.CompletionAccepted, 300),
					failed(run("b/e1", "b/c1", "f", 210, 220, ""), "boom"),
				},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
			want: []history.Kind{history.StaleOwner},
		},
		{
			name: "a late starter whose process was paused, cancelled too late",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 700, history.LeaseLost, "", "p/e1"),
					call("a/c1", "f", 200, 260, history.Executed, "w", "a/e1"),
				},
				Execs: []history.Execution{
					failed(canceled(run("p/e1", "p/c1", "f", 501, 690, ""), 680), "context canceled"),
					run("a/e1", "a/c1", "f", 250, 255, "w"),
				},
				Faults: []history.Fault{pause("p", 101, 500)},
				Finals: []history.Final{final(completed("f", "w"), absent)},
			},
			want: []history.Kind{history.StaleOwner},
		},
		{
			name: "a late starter overlapping the owner, neither fenced",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 900, history.Executed, "v", "a/e1"),
					call("p/c1", "f", 100, 900, history.LeaseLost, "", "p/e1"),
				},
				Execs: []history.Execution{
					run("a/e1", "a/c1", "f", 300, 800, "v"),
					failed(run("p/e1", "p/c1", "f", 501, 890, ""), "context canceled"),
				},
				Faults: []history.Fault{pause("p", 101, 500)},
				Finals: []history.Final{final(completed("f", "v"), absent)},
			},
			want: []history.Kind{history.StaleOwner},
		},
		{
			name: "a stale owner cancelled in time, though it was slow to return",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 900, history.LeaseLost, "", "p/e1"),
					call("a/c1", "f", 200, 260, history.Executed, "w", "a/e1"),
				},
				Execs: []history.Execution{
					failed(canceled(run("p/e1", "p/c1", "f", 101, 890, ""), 505), "context canceled"),
					run("a/e1", "a/c1", "f", 250, 255, "w"),
				},
				Faults: []history.Fault{pause("p", 110, 500)},
				Finals: []history.Final{final(completed("f", "w"), completed("f", "w"))},
			},
		},
		{
			name: "a stale owner cancelled, but for another cause",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 900, history.Closed, "", "p/e1"),
					call("a/c1", "f", 200, 260, history.Executed, "w", "a/e1"),
				},
				Execs: []history.Execution{
					func() history.Execution {
						e := failed(run("p/e1", "p/c1", "f", 101, 890, ""), "context canceled")
						e.Canceled, e.Cause = 505, "tiered: store closed"
						return e
					}(),
					run("a/e1", "a/c1", "f", 250, 255, "w"),
				},
				Faults: []history.Fault{pause("p", 110, 500)},
				Finals: []history.Final{final(completed("f", "w"), absent)},
			},
			want: []history.Kind{history.StaleOwner},
		},
		{
			name: "the work runs again after a caller was told the key is finalised as not replayable",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 102, history.Canceled, "", "a/e1"),
					call("b/c1", "f", 200, 201, history.NotReplayable, "", ""),
					call("c/c1", "f", 300, 320, history.FnFailed, "", "c/e1"),
				},
				Execs: []history.Execution{
					run("a/e1", "a/c1", "f", 101, 110, "a very large body"),
					failed(run("c/e1", "c/c1", "f", 301, 310, ""), "declined"),
				},
				Finals: []history.Final{final(completed("f", "\x00tombstone"), absent)},
			},
			want: []history.Kind{history.RerunAfterSuccess},
		},
		{
			name: "Redis still holds a claim",
			h: history.History{
				Calls:  []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1")},
				Execs:  []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
				Finals: []history.Final{final(completed("f", "v"), history.Stored{State: history.InProgress, Fingerprint: "f"})},
			},
			want: []history.Kind{history.LeftClaimed},
		},
		{
			name: "SQL holds bytes no execution produced",
			h: history.History{
				Calls:  []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1")},
				Execs:  []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
				Finals: []history.Final{final(completed("f", "v\x00garbage"), absent)},
			},
			want: []history.Kind{history.CorruptResult},
		},
		{
			name: "Redis holds a stale owner's refused result",
			h: history.History{
				Calls: []history.Call{
					call("p/c1", "f", 100, 520, history.LeaseLost, "v", "p/e1"),
					call("a/c1", "f", 200, 260, history.Executed, "w", "a/e1"),
				},
				Execs: []history.Execution{
					completion(canceled(run("p/e1", "p/c1", "f", 101, 503, "v"), 501), history.CompletionRefused, 510),
					run("a/e1", "a/c1", "f", 250, 255, "w"),
				},
				Faults: []history.Fault{pause("p", 110, 500)},
				Finals: []history.Final{final(completed("f", "w"), completed("f", "v"))},
			},
			want: []history.Kind{history.SplitRecord},
		},
		{
			name: "a replay of another key's result",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.Executed, "v", "a/e1"),
					{ID: "b/c1", Node: "b", Key: "other", Fingerprint: "f", Invoke: 200, Return: 201, Outcome: history.Replayed, Value: []byte("v")},
				},
				Execs: []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v")},
			},
			want: []history.Kind{history.ForeignResult},
		},
		{
			name: "a replay of a failed execution's value",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 120, history.FnFailed, "partial", "a/e1"),
					call("b/c1", "f", 200, 201, history.Replayed, "partial", ""),
				},
				Execs: []history.Execution{func() history.Execution {
					e := failed(run("a/e1", "a/c1", "f", 101, 110, ""), "boom")
					e.Value = []byte("partial")
					return e
				}()},
			},
			want: []history.Kind{history.ForeignResult},
		},
		{
			name: "an owner told success though its work failed",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, "", "a/e1")},
				Execs: []history.Execution{failed(run("a/e1", "a/c1", "f", 101, 110, ""), "boom")},
			},
			want: []history.Kind{history.ForeignResult},
		},
		{
			name: "an owner that got other bytes than its work returned",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v2", "a/e1")},
				Execs: []history.Execution{run("a/e1", "a/c1", "f", 101, 110, "v1")},
			},
			want: []history.Kind{history.CorruptResult},
		},
		{
			name: "an executed call naming another node's execution",
			h: history.History{
				Calls: []history.Call{call("a/c1", "f", 100, 120, history.Executed, "v", "b/e1")},
				Execs: []history.Execution{run("b/e1", "", "f", 101, 110, "v")},
			},
			want: []history.Kind{history.Malformed},
		},
		{
			name: "a key without a final state among keys with one",
			h: history.History{
				Calls: []history.Call{
					call("a/c1", "f", 100, 101, history.Unavailable, "", ""),
					{ID: "a/c2", Node: "a", Key: "k2", Fingerprint: "f", Invoke: 100, Return: 101, Outcome: history.Unavailable},
				},
				Finals: []history.Final{final(absent, absent)},
			},
			want: []history.Kind{history.Malformed},
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
