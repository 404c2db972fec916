package reliability_test

import (
	"context"
	"errors"
	"fmt"

	"pgregory.net/rapid"

	"github.com/idemkit/idem"
)

// How the property test explains a failing call and checks what the
// stores hold against the model.

// explain fails t unless c's outcome is one the model allows.
func (m *propModel) explain(t *rapid.T, c *callRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.key(c.op)
	h := m.hist0(k)
	during := func(r *run) bool { return r.start < c.end && (r.end == 0 || r.end > c.start) }
	someRun := func(pred func(r *run) bool) bool {
		for _, r := range h.runs {
			if pred(r) {
				return true
			}
		}
		return false
	}
	// Another call of the key overlapping this one may have held a claim
	// (in Redis first) before its function started, or without running it.
	otherCall := func(pred func(o *callRec) bool) bool {
		for _, o := range h.calls {
			if o != c && o.start < c.end && o.end > c.start && pred(o) {
				return true
			}
		}
		return false
	}
	desc := fmt.Sprintf("%v on node %d, key %d: res %q replayed=%v dup=%v err=%v (own fn ran %v)",
		c.op.kind, c.op.node, c.op.key, c.res.Value, c.res.Replayed, c.dup, c.err, c.ranOwn)
	switch {
	case c.err == nil:
		if h.success == nil {
			t.Fatalf("%s: success with no successful run of the key", desc)
		}
		if h.success.fp != c.fp {
			t.Fatalf("%s: success for fingerprint %s, but the key's run was for %s", desc, c.fp, h.success.fp)
		}
		if c.op.kind.once() {
			if c.dup == c.ranOwn {
				t.Fatalf("%s: duplicate must mean the caller's function did not run", desc)
			}
			return
		}
		if string(c.res.Value) != string(h.success.val) {
			t.Fatalf("%s: got %q, the key's one successful run returned %q", desc, c.res.Value, h.success.val)
		}
	case errors.Is(c.err, idem.ErrMismatch):
		if !someRun(func(r *run) bool { return r.fp != c.fp && r.start < c.end }) && !otherCall(func(o *callRec) bool { return o.fp != c.fp }) {
			t.Fatalf("%s: mismatch, but no call with another fingerprint had come", desc)
		}
	case errors.Is(c.err, idem.ErrInFlight):
		if !someRun(func(r *run) bool { return during(r) }) && !otherCall(func(*callRec) bool { return true }) {
			t.Fatalf("%s: in flight, but nothing else of the key was in flight", desc)
		}
	case errors.Is(c.err, idem.ErrLeaseLost) && !c.ranOwn:
		// A claim whose answer came with less than a third of its lease
		// left, and could not be renewed in time (renewals held, SQL slow,
		// a loaded machine), is given up before the work starts: nothing
		// ran, the key is released, a retry runs.
	case errors.Is(c.err, idem.ErrLeaseLost):
		if !someRun(func(r *run) bool { return r.leaseLost && during(r) }) {
			t.Fatalf("%s: lease lost, but no run of the key lost its lease", desc)
		}
	case errors.Is(c.err, errBoom):
		// A failure is shared in the process only, with the callers that
		// joined its execution, which goes on after the function returned
		// (releasing its claims) until its leader's call returns: the
		// failing calls never give up.
		if !someRun(func(r *run) bool {
			failing := r.kind == opFail || r.kind == opOnceFail || r.kind == opPanic
			inFlight := r.start < c.end && (r.call.end == 0 || r.call.end > c.start)
			return failing && r.fp == c.fp && r.node == c.op.node && inFlight
		}) {
			t.Fatalf("%s: a function's failure, but no failing run of the key was in flight", desc)
		}
	case errors.Is(c.err, context.Canceled):
		if c.op.kind != opCancel {
			t.Fatalf("%s: cancelled, but this caller did not give up", desc)
		}
	default:
		t.Fatalf("%s: an error no fault explains", desc)
	}
}

// checkStores fails t when a stored state breaks an invariant.
func (m *propModel) checkStores(t *rapid.T) {
	m.mu.Lock()
	for d, h := range m.hist {
		if h.successes > 1 {
			t.Fatalf("key %x: the function succeeded %d times", d[:8], h.successes)
		}
		if h.overlaps > 0 {
			t.Fatalf("key %x: %d runs overlapped another run of the key", d[:8], h.overlaps)
		}
	}
	m.mu.Unlock()
	ctx := context.Background()
	b := m.env.b
	if keys, err := b.immortalKeys(ctx); err != nil || len(keys) > 0 {
		t.Fatalf("Redis keys without a TTL: %v (%v)", keys, err)
	}
	if n, err := b.countRows(ctx, b.lapsedWhere()); err != nil || n > 0 {
		t.Fatalf("%d SQL claims in progress whose lease lapsed by the database clock (%v)", n, err)
	}
	if n, err := b.countRows(ctx, "state IN (1, 3)"); err != nil || n > 0 {
		t.Fatalf("%d SQL claims left in progress after every call returned (%v)", n, err)
	}
}

// verify clears every fault and asks every key once more: a key whose
// function succeeded replays those bytes and refuses the other fingerprint;
// a key whose runs all failed (released) runs now, exactly once.
func (m *propModel) verify(t *rapid.T) {
	for i, n := range m.env.nodes {
		n.redis.Up()
		n.sql.Up()
		m.redisDown[i], m.sqlSlow[i], m.renewRefused[i] = false, false, false
	}
	for i := range doKeys + onceKeys {
		node := rapid.IntRange(0, len(m.env.nodes)-1).Draw(t, "verify node")
		o := op{kind: opOK, node: node, key: i}
		if i >= doKeys {
			o = op{kind: opOnce, node: node, key: i - doKeys}
		}
		k := m.key(o)
		m.mu.Lock()
		before := m.hist0(k).success
		m.mu.Unlock()
		if before != nil && !o.kind.once() && before.fp != fpOf(o) {
			o.kind = opMismatch // ask with the fingerprint that was stored
		}
		c := m.call(context.Background(), o)
		m.explain(t, c)
		if before != nil && (c.err != nil || c.ranOwn || (!o.kind.once() && !c.res.Replayed) || (o.kind.once() && !c.dup)) {
			t.Fatalf("verify key %d: it succeeded before, want a replay without a run; got %+v", i, c)
		}
		if before == nil && (c.err != nil || !c.ranOwn) {
			t.Fatalf("verify key %d: every run failed before (released), want a run now; got %+v", i, c)
		}
		if !o.kind.once() {
			other := o
			other.kind = opMismatch
			if o.kind == opMismatch {
				other.kind = opOK
			}
			c2 := m.call(context.Background(), other)
			if !errors.Is(c2.err, idem.ErrMismatch) || c2.ranOwn {
				t.Fatalf("verify key %d with the other fingerprint: %+v, want ErrMismatch", i, c2)
			}
		}
	}
}
