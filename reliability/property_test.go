package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// The property test drives three Stores over one Redis and one database
// with random bursts of concurrent calls and random faults between bursts,
// and checks after every step:
//
//   - a key's function succeeds at most once while its record lives, and
//     two runs of one key never overlap (a run that failed released the key,
//     so another may follow it);
//   - every caller that succeeded got the bytes of that one successful run
//     (Once: duplicate only when that run exists, not duplicate only when
//     its own function ran);
//   - every error is one the faults and the calls in flight explain:
//     ErrMismatch only when a run with the other fingerprint had started,
//     ErrInFlight only while another run of the key was in flight,
//     ErrLeaseLost only when a run lost its lease, a function's own error
//     or panic only when a failing run of the key shared the caller's
//     execution, never ErrUnavailable (no fault here takes the deciding
//     tier away);
//   - every Redis key under the test's prefix has a TTL;
//   - once every call has returned, no claim is left in progress in SQL
//     (none whose lease lapsed by the database clock, and none at all).
//
// A Verify step clears the faults and asks every key again: a key whose
// function succeeded replays its bytes (and refuses the other
// fingerprint); a key whose runs all failed runs now, once.

const (
	propLease = 600 * time.Millisecond
	propWait  = 3 * time.Second
	propSlow  = 900 * time.Millisecond // longer than the lease: renewals must work
	propDelay = 60 * time.Millisecond  // "SQL slow"
	doKeys    = 3
	onceKeys  = 2
)

var (
	errBoom    = errors.New("the function failed")
	errRefused = errors.New("renewal refused by an injected fault")
)

// opKind is what one call does.
type opKind int

const (
	opOK       opKind = iota // Do, the function succeeds
	opMismatch               // Do with the other fingerprint, succeeds
	opFail                   // Do, the function returns an error
	opPanic                  // Do, the function panics
	opSlow                   // Do, the function outlives the lease (or stops when it is lost)
	opCancel                 // Do, the caller gives up while the work runs
	opOnce                   // Once, succeeds
	opOnceFail               // Once, fails
	numOps
)

var opNames = [...]string{"ok", "mismatch", "fail", "panic", "slow", "cancel", "once", "once-fail"}

func (k opKind) String() string { return opNames[k] }

func (k opKind) once() bool { return k == opOnce || k == opOnceFail }

// op is one call of a burst.
type op struct {
	kind opKind
	node int
	key  int // index into the Do keys, or the Once keys for Once ops
}

// run is one execution of a guarded function.
type run struct {
	fp         string
	node       int
	kind       opKind
	start, end int64 // sequence numbers
	ok         bool
	val        []byte
	leaseLost  bool
	// call is the call whose function this is, the execution's leader:
	// its Do returns only once the execution has ended (its claims
	// released), later than the function.
	call *callRec
}

// keyHist is everything that happened to one key.
type keyHist struct {
	calls     []*callRec
	runs      []*run
	active    int
	overlaps  int
	successes int
	success   *run
}

// callRec is one call and what it returned.
type callRec struct {
	op         op
	fp         string
	start, end int64
	res        tiered.Result
	dup        bool
	err        error
	ranOwn     bool // this call's own function ran
}

// propEnv is the three Stores of one backend, kept across checks.
type propEnv struct {
	b       *backend
	nodes   []*node
	checkNo atomic.Int64
	cases   atomic.Int64
	steps   atomic.Int64
	calls   atomic.Int64
}

// propModel is the state of one check.
type propModel struct {
	env   *propEnv
	keys  []idem.Key // doKeys Do keys, then onceKeys Once keys
	seq   atomic.Int64
	mu    sync.Mutex // guards hist
	hist  map[[idem.KeySize]byte]*keyHist
	valNo atomic.Int64

	// faults in force per node
	redisDown, sqlSlow, renewRefused []bool
}

func (m *propModel) now() int64 { return m.seq.Add(1) }

func (m *propModel) hist0(k idem.Key) *keyHist {
	d := k.Digest()
	h := m.hist[d]
	if h == nil {
		h = &keyHist{}
		m.hist[d] = h
	}
	return h
}

func (m *propModel) key(o op) idem.Key {
	if o.kind.once() {
		return m.keys[doKeys+o.key]
	}
	return m.keys[o.key]
}

func fpOf(o op) string {
	switch {
	case o.kind.once():
		return "once"
	case o.kind == opMismatch:
		return "fp-B"
	}
	return "fp-A"
}

// fn returns the guarded function of call c; ran is set when it runs.
func (m *propModel) fn(c *callRec, k idem.Key, ran *atomic.Bool, started chan<- struct{}) tiered.Func {
	o := c.op
	fp := fpOf(o)
	return func(ctx context.Context) (val []byte, err error) {
		ran.Store(true)
		r := &run{fp: fp, node: o.node, kind: o.kind, call: c}
		m.mu.Lock()
		h := m.hist0(k)
		r.start = m.now()
		h.runs = append(h.runs, r)
		h.active++
		if h.active > 1 {
			h.overlaps++
		}
		m.mu.Unlock()
		panicked := true // until the function returns
		defer func() {
			m.mu.Lock()
			h.active--
			r.end = m.now()
			if err == nil && !panicked {
				r.ok, r.val = true, val
				h.successes++
				h.success = r
			}
			m.mu.Unlock()
		}()
		if started != nil {
			close(started)
		}
		defer func() {
			if recover() == nil {
				panicked = false
			} else {
				panic(errBoom)
			}
		}()
		v := fmt.Appendf(nil, "%s run %d on node %d", k.String(), m.valNo.Add(1), o.node)
		switch o.kind {
		case opFail, opOnceFail:
			return []byte("partial"), errBoom
		case opPanic:
			panic(errBoom)
		case opSlow:
			t := time.NewTimer(propSlow)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				r.leaseLost = errors.Is(context.Cause(ctx), idem.ErrLeaseLost)
				return nil, ctx.Err()
			}
		case opCancel:
			// Give the caller time to give up while the work runs.
			t := time.NewTimer(20 * time.Millisecond)
			defer t.Stop()
			<-t.C
		}
		if o.kind.once() {
			return nil, nil
		}
		return v, nil
	}
}

// call makes one call of op and records it.
func (m *propModel) call(ctx context.Context, o op) *callRec {
	k := m.key(o)
	c := &callRec{op: o, fp: fpOf(o)}
	var ran atomic.Bool
	n := m.env.nodes[o.node]
	var started chan struct{}
	if o.kind == opCancel {
		started = make(chan struct{})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // the caller that gives up
			defer close(done)
			t := time.NewTimer(30 * time.Millisecond)
			defer t.Stop()
			select {
			case <-started:
			case <-t.C:
			case <-stop:
				return
			}
			cancel()
		}()
		defer func() { close(stop); <-done }()
		ctx = cctx
	}
	fn := m.fn(c, k, &ran, started)
	m.mu.Lock()
	c.start = m.now()
	h := m.hist0(k)
	h.calls = append(h.calls, c)
	m.mu.Unlock()
	if o.kind.once() {
		c.dup, c.err = n.Once(ctx, k, func(ctx context.Context) error {
			_, err := fn(ctx)
			return err
		})
	} else {
		c.res, c.err = n.Do(ctx, k, c.fp, fn)
	}
	m.mu.Lock()
	c.end = m.now()
	m.mu.Unlock()
	c.ranOwn = ran.Load()
	m.env.calls.Add(1)
	return c
}

// burst runs ops concurrently from one start signal, then, for each caller
// that gave up, the same call again on the same node: it joins the work
// still running or finds its outcome, so that every execution has ended
// when burst returns.
func (m *propModel) burst(t *rapid.T, ops []op) []*callRec {
	recs := make([]*callRec, len(ops))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, o := range ops {
		wg.Go(func() {
			<-start
			recs[i] = m.call(context.Background(), o)
		})
	}
	close(start)
	wg.Wait()
	for _, c := range recs {
		if c.op.kind == opCancel {
			follow := c.op
			follow.kind = opOK
			recs = append(recs, m.call(context.Background(), follow))
		}
	}
	return recs
}

// TestPropertyRandomInterleavingsUnderFaults runs the state machine on the
// real services (test-owned redis-server, Postgres) and on the embedded
// pair. -rapid.checks and -rapid.steps scale it (defaults set in TestMain).
func TestPropertyRandomInterleavingsUnderFaults(t *testing.T) {
	eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
		env := &propEnv{b: b}
		for range 3 {
			env.nodes = append(env.nodes, b.node(t, withStore(
				tiered.WithLease(propLease), tiered.WithWait(propWait),
				tiered.WithTimeouts(redisTimeout, 2*time.Second),
				tiered.WithRedisFallback(3, 200*time.Millisecond))))
		}
		rapid.Check(t, func(rt *rapid.T) {
			env.cases.Add(1)
			no := env.checkNo.Add(1)
			m := &propModel{env: env, hist: map[[idem.KeySize]byte]*keyHist{},
				redisDown: make([]bool, 3), sqlSlow: make([]bool, 3), renewRefused: make([]bool, 3)}
			for i := range doKeys + onceKeys {
				m.keys = append(m.keys, idem.NewKey(fmt.Sprintf("check-%d", no), fmt.Sprintf("key-%d", i)))
			}
			defer func() { // leave no fault to the next check
				for _, n := range env.nodes {
					n.redis.Up()
					n.sql.Up()
				}
			}()
			nodeGen := rapid.IntRange(0, 2)
			rt.Repeat(map[string]func(*rapid.T){
				"burst": func(rt *rapid.T) {
					env.steps.Add(1)
					count := rapid.IntRange(1, 4).Draw(rt, "calls")
					ops := make([]op, count)
					for i := range ops {
						kind := opKind(rapid.IntRange(0, int(numOps)-1).Draw(rt, "kind"))
						if kind == opSlow && rapid.IntRange(0, 2).Draw(rt, "keep slow") != 0 {
							kind = opOK // slow calls cost a lease each: keep them rare
						}
						nkeys := doKeys
						if kind.once() {
							nkeys = onceKeys
						}
						ops[i] = op{kind: kind, node: nodeGen.Draw(rt, "node"), key: rapid.IntRange(0, nkeys-1).Draw(rt, "key")}
					}
					for _, c := range m.burst(rt, ops) {
						m.explain(rt, c)
					}
				},
				"redis down": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.redisDown[n] = true
					env.nodes[n].redis.Down()
				},
				"redis up": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.redisDown[n] = false
					env.nodes[n].redis.Up()
				},
				"sql slow": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.sqlSlow[n] = true
					env.nodes[n].sql.Delay(propDelay)
				},
				"sql fast": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.sqlSlow[n] = false
					env.nodes[n].sql.Delay(0)
				},
				"refuse renewals": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.renewRefused[n] = true
					env.nodes[n].sql.Fail(errRefused, faultlayer.Renew)
				},
				"allow renewals": func(rt *rapid.T) {
					n := nodeGen.Draw(rt, "node")
					m.renewRefused[n] = false
					env.nodes[n].sql.Fail(nil, faultlayer.Renew)
				},
				"verify": func(rt *rapid.T) {
					env.steps.Add(1)
					m.verify(rt)
				},
				"": m.checkStores,
			})
		})
		t.Logf("%s: %d cases, %d call steps, %d calls", b.name, env.cases.Load(), env.steps.Load(), env.calls.Load())
	})
}
