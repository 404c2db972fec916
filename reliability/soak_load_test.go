//go:build unix

package reliability_test

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/reliability/internal/history"
)

// The soak's client: workers that send the payments API what clients
// send — new operations, retries with the same body, bursts of concurrent
// duplicates across and within processes, a retry with another body
// (mismatch), bodies a Go handler reads differently from how the
// fingerprint hashes them, keys that outlive their short retention — and
// record every request as a call of the history, served by the child it
// went to.

// soakKey is one operation of the load: its client key, route, and the
// bodies sent with it (the first is the operation's own).
type soakKey struct {
	name   string
	route  string
	mu     sync.Mutex // guards bodies
	bodies []soakBody
}

// soakBody is a request body and what it means to the handler.
type soakBody struct {
	raw     []byte
	meaning string
}

func (k *soakKey) body(i int) soakBody {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bodies[i]
}

// variant returns the index of a body for another operation under the
// same key: another amount, made the first time it is asked for.
func (k *soakKey) variant() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.bodies) == 1 {
		var c charge
		_ = json.Unmarshal(k.bodies[0].raw, &c)
		c.Amount++
		raw, _ := json.Marshal(c)
		k.bodies = append(k.bodies, mustBody(k.route, raw))
	}
	return 1
}

func mustBody(route string, raw []byte) soakBody {
	m, err := meaning(route, raw)
	if err != nil {
		panic(fmt.Sprintf("soak: a body of the load does not decode: %s: %v", raw, err))
	}
	return soakBody{raw: raw, meaning: m}
}

// load is the client side of the soak.
type load struct {
	rec    *history.Recorder
	procs  *procSet
	client *http.Client
	set    soakSettings

	seq  atomic.Int64
	mu   sync.Mutex // guards keys, recent and later
	keys []*soakKey
	// recent holds the last keys of the long route, for retries.
	recent    []*soakKey
	recentPos int
	later     laterQueue // retries due at a time, of keys on the short route

	calls atomic.Int64
	// noSlowAfter ends slow work this long before the load's end, so
	// that it ends with the load (set by run).
	noSlowAfter atomic.Int64
	// bg runs the slow requests, which would hold a worker for seconds;
	// slots bounds how many run at once.
	bg    sync.WaitGroup
	slots chan struct{}
}

func newLoad(rec *history.Recorder, procs *procSet, set soakSettings) *load {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &load{rec: rec, procs: procs, set: set, recent: make([]*soakKey, 0, 512), slots: make(chan struct{}, 64),
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

func (l *load) close() { l.client.CloseIdleConnections() }

// newKey makes a key on route whose first body is raw (nil: a plain charge).
func (l *load) newKey(r *rand.Rand, route, kind string, raws ...[]byte) *soakKey {
	k := &soakKey{name: fmt.Sprintf("%s%d", kind, l.seq.Add(1)), route: route}
	if len(raws) == 0 {
		raws = [][]byte{fmt.Appendf(nil, `{"amount":%d,"currency":"EUR","account":"acct-%s"}`, 1+r.IntN(100000), k.name)}
	}
	for _, raw := range raws {
		k.bodies = append(k.bodies, mustBody(route, raw))
	}
	l.mu.Lock()
	l.keys = append(l.keys, k)
	if route == routeLong {
		if len(l.recent) < cap(l.recent) {
			l.recent = append(l.recent, k)
		} else {
			l.recent[l.recentPos] = k
			l.recentPos = (l.recentPos + 1) % len(l.recent)
		}
	}
	l.mu.Unlock()
	return k
}

// recentKey returns one of the last keys of the long route, or nil.
func (l *load) recentKey(r *rand.Rand) *soakKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) == 0 {
		return nil
	}
	return l.recent[r.IntN(len(l.recent))]
}

// allKeys returns every key the load made.
func (l *load) allKeys() []*soakKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*soakKey(nil), l.keys...)
}

// node picks the child a request goes to. Like a load balancer that
// checks its instances, it mostly routes around a child that does not
// answer (the nemesis paused it): otherwise every worker would soon wait
// on it. A few requests still go there, and are answered once it resumes.
func (l *load) node(r *rand.Rand) *proc {
	for range 3 {
		if p := l.procs.pick(r); !p.paused.Load() {
			return p
		}
	}
	return l.procs.pick(r)
}

// behaviourFor picks what a first request asks of the handler on p.
// Panics in a later middleware exist on Gin only; slow work only on the
// long route (a record that expires under running work is another story).
func behaviourFor(r *rand.Rand, p *proc, route string) behaviour {
	x := r.IntN(1000)
	switch {
	case x < 40 && route == routeLong:
		return behaveSlow
	case x < 70:
		return behaveFail
	case x < 90:
		return behavePanic
	case x < 110:
		return behavePanicLate
	case x < 150 && p.framework == "gin":
		return behaveMWPanic
	}
	return behaveOK
}

// step is one action of a worker.
func (l *load) step(ctx context.Context, r *rand.Rand) {
	if job, ok := l.due(); ok {
		l.call(ctx, job.key, 0, l.node(r), behaveOK)
		return
	}
	switch x := r.IntN(1000); {
	case x < 60:
		l.fresh(ctx, r)
	case x < 840:
		l.retry(ctx, r)
	case x < 900:
		l.burst(ctx, r)
	case x < 920:
		l.mismatch(ctx, r)
	case x < 930:
		l.ambiguous(ctx, r)
	case x < 960:
		l.expiring(ctx, r)
	default:
		l.retry(ctx, r)
	}
}

// fresh is a new operation: its first request, its client's retries until
// it has an answer, and a few more retries (lost answers, say).
func (l *load) fresh(ctx context.Context, r *rand.Rand) {
	k := l.newKey(r, routeLong, "k")
	p := l.node(r)
	b := behaviourFor(r, p, k.route)
	if b == behaveSlow {
		l.callAside(ctx, k, 0, p, b)
		return // its retries come as retries of a recent key
	}
	out := l.call(ctx, k, 0, p, b)
	l.settle(ctx, r, k, 0, 4, out)
	for range r.IntN(3) {
		l.call(ctx, k, 0, l.node(r), behaveOK)
	}
}

// retry sends a recent operation again, as its client would after losing
// the answer; now and then with a behaviour of its own.
func (l *load) retry(ctx context.Context, r *rand.Rand) {
	k := l.recentKey(r)
	if k == nil {
		l.fresh(ctx, r)
		return
	}
	p, b := l.node(r), behaveOK
	if r.IntN(20) == 0 {
		b = behaviourFor(r, p, k.route)
	}
	if b == behaveSlow {
		l.callAside(ctx, k, 0, p, b)
		return
	}
	l.call(ctx, k, 0, p, b)
}

// burst is a first request and, while it runs, concurrent duplicates on
// its own process and on the others: the leader is often slow, so the
// duplicates wait for it.
func (l *load) burst(ctx context.Context, r *rand.Rand) {
	k := l.newKey(r, routeLong, "h")
	lead := l.node(r)
	b := behaviourFor(r, lead, k.route)
	if r.IntN(3) == 0 {
		b = behaveSlow
	}
	var wg sync.WaitGroup
	if b == behaveSlow {
		l.callAside(ctx, k, 0, lead, b)
	} else {
		wg.Go(func() { l.call(ctx, k, 0, lead, b) })
	}
	sleepCtx(ctx, 30*time.Millisecond) // let the leader claim the key
	n := 2 + r.IntN(8)
	nodes := make([]*proc, n)
	for i := range nodes {
		nodes[i] = lead
		if i%2 == 1 {
			nodes[i] = l.node(r)
		}
	}
	for _, p := range nodes {
		wg.Go(func() { l.call(ctx, k, 0, p, behaveOK) })
	}
	wg.Wait()
	if b != behaveSlow { // a slow one's retries come as retries of a recent key
		l.settle(ctx, r, k, 0, 3, history.Unknown)
	}
}

// mismatch reuses a recent key for another operation: the client's bug
// the key is there to catch.
func (l *load) mismatch(ctx context.Context, r *rand.Rand) {
	k := l.recentKey(r)
	if k == nil {
		return
	}
	l.call(ctx, k, k.variant(), l.node(r), behaveOK)
}

// ambiguous sends, under one key, two bodies that a Go handler reads as
// different charges: member names that differ in case only (encoding/json
// matches them case-insensitively, the last one wins), or integers beyond
// 2^53 that differ by one. The second is a mismatch, never a replay of
// the first one's answer.
func (l *load) ambiguous(ctx context.Context, r *rand.Rand) {
	var a, b []byte
	acct := fmt.Sprintf(`"currency":"EUR","account":"acct-a%d"`, r.IntN(1<<30))
	if r.IntN(2) == 0 {
		lo, hi := 1+r.IntN(500), 501+r.IntN(500)
		a = fmt.Appendf(nil, `{"amount":%d,"AMOUNT":%d,%s}`, hi, lo, acct)
		b = fmt.Appendf(nil, `{"AMOUNT":%d,"amount":%d,%s}`, lo, hi, acct)
	} else {
		a = fmt.Appendf(nil, `{"amount":9007199254740993,%s}`, acct)
		b = fmt.Appendf(nil, `{"amount":9007199254740992,%s}`, acct)
	}
	k := l.newKey(r, routeLong, "a", a, b)
	out := l.call(ctx, k, 0, l.node(r), behaveOK)
	l.settle(ctx, r, k, 0, 3, out)
	l.call(ctx, k, 1, l.node(r), behaveOK)
}

// expiring is a key on the short route, whose record lives less than the
// local cache's TTL: retried on every process over a span several times
// its retention, so that it runs again after expiry on one process while
// another still remembers it.
func (l *load) expiring(ctx context.Context, r *rand.Rand) {
	k := l.newKey(r, routeShort, "s")
	p := l.node(r)
	b := behaviourFor(r, p, k.route)
	out := l.call(ctx, k, 0, p, b)
	l.settle(ctx, r, k, 0, 3, out)
	now := time.Now()
	span := 4 * l.set.shortRetention
	l.mu.Lock()
	for range 3 + r.IntN(6) {
		heap.Push(&l.later, laterJob{at: now.Add(time.Duration(r.Int64N(int64(span)))), key: k})
	}
	l.mu.Unlock()
}

// due pops a retry whose time has come.
func (l *load) due() (laterJob, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.later) == 0 || l.later[0].at.After(time.Now()) {
		return laterJob{}, false
	}
	return heap.Pop(&l.later).(laterJob), true
}

// run drives the load with workers until ctx ends; slow work is asked
// for only until slowUntil.
func (l *load) run(ctx context.Context, workers int, slowUntil time.Time) {
	l.noSlowAfter.Store(slowUntil.UnixNano())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(l.set.seed, uint64(w)))
			for ctx.Err() == nil {
				l.step(ctx, r)
			}
		})
	}
	wg.Wait()
	l.bg.Wait()
}

// quiet calls every key once more, with its own body and nothing asked of
// the handler, once the faults are lifted and every lease has lapsed:
// each call takes a leftover claim over, so that no claim may remain. A
// key bound to another of its bodies is called with that one too.
func (l *load) quiet(ctx context.Context, seed uint64, workers int) {
	keys := l.allKeys()
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed^0x5eed, uint64(w)))
			for i := int(next.Add(1)) - 1; i < len(keys) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				k := keys[i]
				k.mu.Lock()
				n := len(k.bodies)
				k.mu.Unlock()
				for b := range n {
					if out := l.settle(ctx, r, k, b, 6, history.Unknown); out != history.Mismatch {
						break
					}
				}
			}
		})
	}
	wg.Wait()
}

// laterJob is a retry due at a time.
type laterJob struct {
	at  time.Time
	key *soakKey
}

// laterQueue is a min-heap of retries by time.
type laterQueue []laterJob

func (q laterQueue) Len() int           { return len(q) }
func (q laterQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q laterQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *laterQueue) Push(x any)        { *q = append(*q, x.(laterJob)) }
func (q *laterQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
