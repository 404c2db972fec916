package history_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// clone copies h deeply enough for a corruption to change it.
func clone(h *history.History) *history.History {
	return &history.History{
		Calls: slices.Clone(h.Calls), Execs: slices.Clone(h.Execs),
		Faults: slices.Clone(h.Faults), Finals: slices.Clone(h.Finals),
	}
}

// corruption breaks one promise on one key of a correct history, and says
// which anomaly must come out, or false when no key fits.
type corruption struct {
	name string
	want history.Kind
	do   func(g *gen, h *history.History, r *rand.Rand) (key string, ok bool)
}

// pick returns a random key that satisfies ok.
func pick(g *gen, r *rand.Rand, ok func(k *genKey) bool) *genKey {
	var fit []*genKey
	for _, k := range g.keys {
		if ok(k) {
			fit = append(fit, k)
		}
	}
	if len(fit) == 0 {
		return nil
	}
	return fit[r.IntN(len(fit))]
}

var corruptions = []corruption{
	{"duplicate a successful execution", history.DuplicateExecution, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return len(k.acks) > 0 && !k.expired })
		if k == nil {
			return "", false
		}
		orig := h.Calls[k.acks[r.IntN(len(k.acks))]]
		t := orig.Return + 1 + r.Int64N(20)
		c := history.Call{ID: "dup/c1", Node: "a", Key: k.key, Fingerprint: orig.Fingerprint, Invoke: t, Return: t + 5, Outcome: history.Executed, Value: []byte("second charge"), Exec: "dup/e1"}
		h.Calls = append(h.Calls, c)
		h.Execs = append(h.Execs, history.Execution{ID: "dup/e1", Node: "a", Call: c.ID, Key: k.key, Fingerprint: c.Fingerprint, Start: t + 1, End: t + 4, Value: c.Value})
		return k.key, true
	}},
	{"flip a byte of a returned value", history.CorruptResult, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return len(k.acks) > 0 })
		if k == nil {
			return "", false
		}
		c := &h.Calls[k.acks[r.IntN(len(k.acks))]]
		v := slices.Clone(c.Value)
		v[r.IntN(len(v))] ^= 0x80 // no value the generator writes has such a byte
		c.Value = v
		return k.key, true
	}},
	{"swap a caller's fingerprint", history.ForeignResult, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return len(k.replays) > 0 })
		if k == nil {
			return "", false
		}
		c := &h.Calls[k.replays[r.IntN(len(k.replays))]]
		c.Fingerprint = "swapped-" + c.Fingerprint
		return k.key, true
	}},
	{"drop the final record", history.LostResult, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return len(k.acks) > 0 && !k.expired })
		if k == nil {
			return "", false
		}
		h.Finals[k.finalIdx].SQL = history.Stored{State: history.Absent}
		return k.key, true
	}},
	{"leave a key in progress", history.LeftClaimed, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return !k.killed })
		if k == nil {
			return "", false
		}
		f := &h.Finals[k.finalIdx]
		f.SQL = history.Stored{State: history.InProgress, Fingerprint: "f" + k.key}
		return k.key, true
	}},
	{"start an execution after an acknowledged success", history.RerunAfterSuccess, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool { return k.ackAt > 0 && !k.expired })
		if k == nil {
			return "", false
		}
		t := k.ackAt + 1 + r.Int64N(100)
		c := history.Call{ID: "re/c1", Node: "b", Key: k.key, Fingerprint: "f" + k.key, Invoke: t, Return: t + 4, Outcome: history.FnFailed, Exec: "re/e1", Err: "declined"}
		h.Calls = append(h.Calls, c)
		h.Execs = append(h.Execs, history.Execution{ID: "re/e1", Node: "b", Call: c.ID, Key: k.key, Fingerprint: c.Fingerprint, Start: t + 1, End: t + 3, Failed: true, Err: "declined"})
		return k.key, true
	}},
	{"refuse a correct retry", history.RefusedRetry, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool {
			return !k.expired && slices.ContainsFunc(k.replays, func(i int) bool { return g.h.Calls[i].Invoke > k.ackAt })
		})
		if k == nil {
			return "", false
		}
		for _, i := range k.replays {
			if c := &h.Calls[i]; c.Invoke > k.ackAt {
				c.Outcome, c.Value, c.Err = history.Mismatch, nil, "idem: key reused with a different request"
				break
			}
		}
		return k.key, true
	}},
	{"let a stale owner run on", history.StaleOwner, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		// On a key whose record expired, a late start may have been a
		// fresh claim: only overlaps count there.
		k := pick(g, r, func(k *genKey) bool { return len(k.stale) > 0 && !k.expired })
		if k == nil {
			return "", false
		}
		e := &h.Execs[k.stale[r.IntN(len(k.stale))]]
		e.Canceled, e.Cause, e.LeaseLost = 0, "", false
		e.End += 10 * genGrace
		return k.key, true
	}},
	{"accept a stale owner's completion", history.StaleOwner, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		k := pick(g, r, func(k *genKey) bool {
			return !k.expired && slices.ContainsFunc(k.stale, func(i int) bool { return !g.h.Execs[i].Failed })
		})
		if k == nil {
			return "", false
		}
		for _, i := range k.stale {
			if e := &h.Execs[i]; !e.Failed {
				e.Completion = history.CompletionAccepted
				break
			}
		}
		return k.key, true
	}},
	{"reuse an execution ID", history.Malformed, func(g *gen, h *history.History, r *rand.Rand) (string, bool) {
		if len(h.Execs) < 2 {
			return "", false
		}
		i := 1 + r.IntN(len(h.Execs)-1)
		h.Execs[i].ID = h.Execs[r.IntN(i)].ID
		return h.Execs[i].Key, true
	}},
}

// Correct histories give no anomaly; each corruption of one gives the
// anomaly it stands for, on the key it broke and no other.
func TestRandomHistories(t *testing.T) {
	const seeds, keys = 120, 30
	applied := map[string]int{}
	for seed := range uint64(seeds) {
		g := generate(seed, keys)
		h := &g.h
		r := history.Check(h, history.Options{CancelGrace: genGrace})
		if !r.OK() {
			for _, a := range r.Anomalies {
				t.Errorf("seed %d: a correct history: %v", seed, a)
			}
			continue
		}
		rnd := rand.New(rand.NewPCG(seed, 7))
		for _, c := range corruptions {
			bad := clone(h)
			key, ok := c.do(g, bad, rnd)
			if !ok {
				continue
			}
			applied[c.name]++
			r := history.Check(bad, history.Options{CancelGrace: genGrace})
			found := false
			for _, a := range r.Anomalies {
				found = found || a.Kind == c.want
				if a.Key != key && a.Key != "" {
					t.Errorf("seed %d, %s on %s: an anomaly on another key: %v", seed, c.name, key, a)
				}
			}
			if !found {
				t.Errorf("seed %d, %s on %s: no %s among %v", seed, c.name, key, c.want, r.Anomalies)
			}
		}
	}
	for _, c := range corruptions {
		if applied[c.name] < seeds/2 {
			t.Errorf("%s applied to only %d of %d histories", c.name, applied[c.name], seeds)
		}
	}
}
