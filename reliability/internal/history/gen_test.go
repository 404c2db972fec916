package history_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/idemkit/idem/reliability/internal/history"
)

// The generator below writes the histories a correct store would give:
// per key, a sequence of episodes on the key's own timeline (a claim that
// succeeds, fails, is taken over from a paused owner, dies with its
// process, or finds no tier to decide; replays and mismatches on a
// completed key; an expiry). Times count in small steps; the checker runs
// with a grace of genGrace.
const genGrace = 10

// gen builds one history and remembers what the corruptions need.
type gen struct {
	r *rand.Rand
	h history.History
	n int // ID counter

	keys []*genKey
}

// genKey is what the generator knows of one key.
type genKey struct {
	key      string
	expired  bool
	acks     []int // indices of calls told success (Executed, Replayed)
	replays  []int // Replayed calls invoked after the first success
	stale    []int // executions of fenced stale owners
	ackAt    int64 // the first success's return
	killed   bool  // the key's last call died with its process
	finalIdx int
}

var normalNodes = []string{"a", "b", "c"}

func (g *gen) id(kind string) string {
	g.n++
	return fmt.Sprintf("%s%d", kind, g.n)
}

func (g *gen) node() string { return normalNodes[g.r.IntN(len(normalNodes))] }

func (g *gen) call(node, key, fp string, inv, ret int64, out history.Outcome, val []byte, exec string) int {
	g.h.Calls = append(g.h.Calls, history.Call{ID: g.id(node + "/c"), Node: node, Key: key, Fingerprint: fp, Invoke: inv, Return: ret, Outcome: out, Value: val, Exec: exec})
	return len(g.h.Calls) - 1
}

func (g *gen) exec(e history.Execution) int {
	e.ID = g.id(e.Node + "/e")
	g.h.Execs = append(g.h.Execs, e)
	return len(g.h.Execs) - 1
}

func (g *gen) fault(kind history.FaultKind, node string, from, to int64) {
	g.h.Faults = append(g.h.Faults, history.Fault{ID: g.id("nem/f"), Kind: kind, Node: node, Start: from, End: to})
}

func (g *gen) value(e int) []byte {
	x := &g.h.Execs[e]
	return fmt.Appendf(nil, "v|%s|%s|%s", x.ID, x.Key, x.Fingerprint)
}

func generate(seed uint64, keys int) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range keys {
		g.key(i)
	}
	kinds := []history.FaultKind{history.RedisPause, history.RedisFlush, history.SentinelFailover, history.PostgresKill, history.PostgresBlackhole, history.ClockSkew, history.SlowWork}
	for range 4 {
		from := 1000 + g.r.Int64N(6000)
		g.fault(kinds[g.r.IntN(len(kinds))], "", from, from+g.r.Int64N(500))
	}
	return g
}

// key writes the episodes of key i.
func (g *gen) key(i int) {
	k := &genKey{key: fmt.Sprintf("k%d", i)}
	g.keys = append(g.keys, k)
	fps := [2]string{"f" + k.key, "g" + k.key}
	t := 1000 + g.r.Int64N(5000)
	var (
		done    bool   // completed
		bound   string // its fingerprint
		result  []byte
		tomb    bool // finalised as not replayable
		killedF string
	)
	ack := func(c int) {
		k.acks = append(k.acks, c)
		if k.ackAt == 0 {
			k.ackAt = g.h.Calls[c].Return
		}
	}
	for s := range 1 + g.r.IntN(6) {
		k.killed = false
		if done {
			switch x := g.r.IntN(8); {
			case x == 0:
				other := fps[0]
				if bound == other {
					other = fps[1]
				}
				g.call(g.node(), k.key, other, t, t+1, history.Mismatch, nil, "")
			case x == 1 && i%7 == 0: // a key with a short retention
				done, k.expired = false, true
			case tomb:
				g.call(g.node(), k.key, bound, t, t+1, history.NotReplayable, nil, "")
			default:
				c := g.call(g.node(), k.key, bound, t, t+1+g.r.Int64N(3), history.Replayed, result, "")
				ack(c)
				k.replays = append(k.replays, c)
			}
			t += 5 + g.r.Int64N(40)
			continue
		}
		fp := fps[0]
		if g.r.IntN(8) == 0 {
			fp = fps[1]
		}
		switch x := g.r.IntN(12); {
		case x < 2: // fn fails (a 5xx) or panics; the key is released
			o := g.node()
			c := g.call(o, k.key, fp, t, 0, history.FnFailed, nil, "")
			e := g.exec(history.Execution{Node: o, Call: g.h.Calls[c].ID, Key: k.key, Fingerprint: fp, Start: t + 1, End: t + 3, Failed: true, Err: "boom"})
			out, val := history.FnFailed, g.value(e)
			if x == 1 {
				out, val = history.Panicked, nil
			}
			g.h.Execs[e].Value = val
			g.h.Calls[c].Return, g.h.Calls[c].Outcome, g.h.Calls[c].Value, g.h.Calls[c].Exec = t+4, out, val, g.h.Execs[e].ID
			if g.r.IntN(2) == 0 { // a duplicate meanwhile gives up waiting
				g.call(g.node(), k.key, fp, t+1, t+2, history.InFlight, nil, "")
			}
		case x == 2: // the owner is paused past its lease; another takes over
			result = g.takeover(k, fp, t, s, ack)
			done, bound = true, fp
			t += 50
		case x == 3: // the owner's process is killed; its claim stays
			node := fmt.Sprintf("x%d.%d", i, s)
			c := g.call(node, k.key, fp, t, 0, history.Unknown, nil, "")
			if g.r.IntN(3) > 0 {
				g.exec(history.Execution{Node: node, Call: g.h.Calls[c].ID, Key: k.key, Fingerprint: fp, Start: t + 1})
			}
			g.fault(history.ProcessKill, node, t+2, 0)
			k.killed, killedF = true, fp
		case x == 4: // no tier could decide
			g.call(g.node(), k.key, fp, t, t+2, history.Unavailable, nil, "")
		default: // the work runs and succeeds
			o := g.node()
			c := g.call(o, k.key, fp, t, 0, history.Executed, nil, "")
			d := 1 + g.r.Int64N(5)
			e := g.exec(history.Execution{Node: o, Call: g.h.Calls[c].ID, Key: k.key, Fingerprint: fp, Start: t + 1, End: t + 1 + d})
			end := t + 1 + d
			val := g.value(e)
			g.h.Execs[e].Value = val
			if g.r.IntN(2) == 0 {
				g.h.Execs[e].Completion, g.h.Execs[e].Completed = history.CompletionAccepted, end+1
			}
			tomb = g.r.IntN(15) == 0
			switch {
			case tomb:
				g.h.Calls[c].Return, g.h.Calls[c].Outcome, g.h.Calls[c].Value, g.h.Calls[c].Exec = end+2, history.NotReplayable, val, g.h.Execs[e].ID
				result = []byte("\x00tombstone\x00")
			case g.r.IntN(10) == 0: // the caller gave up; the work went on
				g.h.Calls[c].Return, g.h.Calls[c].Outcome = t+1, history.Canceled
				result = val
			default:
				g.h.Calls[c].Return, g.h.Calls[c].Value, g.h.Calls[c].Exec = end+2, val, g.h.Execs[e].ID
				ack(c)
				result = val
			}
			for range g.r.IntN(4) { // duplicates while it ran
				inv := t + g.r.Int64N(d+1)
				switch y := g.r.IntN(4); {
				case y == 0:
					other := fps[1]
					if fp == other {
						other = fps[0]
					}
					g.call(g.node(), k.key, other, inv, inv+1, history.Mismatch, nil, "")
				case y == 1 && inv+1 < end:
					g.call(g.node(), k.key, fp, inv, inv+1, history.InFlight, nil, "")
				case tomb:
					g.call(g.node(), k.key, fp, inv, end+3, history.NotReplayable, nil, "")
				default:
					ack(g.call(g.node(), k.key, fp, inv, end+2+g.r.Int64N(3), history.Replayed, val, ""))
				}
			}
			done, bound = true, fp
		}
		t += 10 + g.r.Int64N(40)
	}
	f := history.Final{Key: k.key, At: 100000, Expired: k.expired, SQL: history.Stored{State: history.Absent}, Redis: history.Stored{State: history.Absent}}
	switch {
	case done:
		f.SQL = history.Stored{State: history.Completed, Fingerprint: bound, Value: result}
		if g.r.IntN(3) > 0 && !tomb {
			f.Redis = f.SQL
		}
	case k.killed:
		f.SQL = history.Stored{State: history.InProgress, Fingerprint: killedF}
	}
	k.finalIdx = len(g.h.Finals)
	g.h.Finals = append(g.h.Finals, f)
}

// takeover writes an owner paused past its lease (in its work, or before
// it started) and a takeover that completes; the stale owner is cancelled
// within the grace once it resumes, and refused. It returns the result.
func (g *gen) takeover(k *genKey, fp string, t int64, s int, ack func(int)) []byte {
	p := fmt.Sprintf("p%s.%d", k.key, s)
	c1 := g.call(p, k.key, fp, t, 0, history.LeaseLost, nil, "")
	late := g.r.IntN(2) == 0 // paused before its work started
	start, pause := t+1, t+2
	if late {
		pause = t + 1
	}
	resume := t + 40
	g.fault(history.ProcessPause, p, pause, resume)
	if late {
		start = resume + 1
	}
	o := g.node()
	c2 := g.call(o, k.key, fp, t+10, t+26, history.Executed, nil, "")
	e2 := g.exec(history.Execution{Node: o, Call: g.h.Calls[c2].ID, Key: k.key, Fingerprint: fp, Start: t + 20, End: t + 25, Completion: history.CompletionAccepted, Completed: t + 25})
	val := g.value(e2)
	g.h.Execs[e2].Value = val
	g.h.Calls[c2].Value, g.h.Calls[c2].Exec = val, g.h.Execs[e2].ID
	ack(c2)
	cancel := max(resume, start) + g.r.Int64N(genGrace/2)
	e1 := g.exec(history.Execution{Node: p, Call: g.h.Calls[c1].ID, Key: k.key, Fingerprint: fp, Start: start,
		Canceled: cancel, Cause: "idem: lease lost", LeaseLost: true, End: cancel + 1 + g.r.Int64N(genGrace/2)})
	x := &g.h.Execs[e1]
	if g.r.IntN(2) == 0 { // fn ignored the cancellation; its completion is refused
		x.Value, x.Completion, x.Completed = g.value(e1), history.CompletionRefused, x.End+1
	} else {
		x.Failed, x.Err = true, "context canceled"
	}
	g.h.Calls[c1].Return, g.h.Calls[c1].Value, g.h.Calls[c1].Err, g.h.Calls[c1].Exec = x.End+2, x.Value, "idem: lease lost", x.ID
	k.stale = append(k.stale, e1)
	return val
}
