//go:build unix

package reliability_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/reliability/internal/history"
)

// soakSettings are the timings of one soak run, shared by the parent and
// its children.
type soakSettings struct {
	dur  time.Duration // how long the load and the faults run
	seed uint64        // draws the load and the faults' schedule

	lease, wait              time.Duration
	redisTimeout, sqlTimeout time.Duration
	longRetention            time.Duration
	shortRetention           time.Duration // below the local cache's TTL (1 min)
	slow                     time.Duration // a slow handler's work
	workers                  int
	// atomic runs the stores in atomic mode (tiered.WithAtomic): every
	// execution writes its charge in the transaction that claims and
	// completes its key, and the nemesis also kills owners' processes.
	atomic bool
	// pgaf, when set, is the pg_auto_failover formation the soak runs on
	// in place of the shared Postgres behind a fault proxy: the children
	// connect with its multi-host DSN, and the nemesis's Postgres track
	// switches its primary over, kills it and crashes it.
	pgaf *pgaf
}

// soakSettingsFrom reads IDEM_SOAK_TIME (how long; 8 s by default: the
// short seed of make test), IDEM_SOAK_SEED (1 by default) and
// IDEM_SOAK_ATOMIC (1: the atomic mode).
func soakSettingsFrom(t *testing.T) soakSettings {
	t.Helper()
	s := soakSettings{
		dur: 8 * time.Second, seed: 1,
		// A short lease, so that faults outlast it; timeouts that let a
		// black hole fail a call well within it.
		lease: 2 * time.Second, wait: 500 * time.Millisecond,
		redisTimeout: 150 * time.Millisecond, sqlTimeout: time.Second,
		longRetention: time.Hour, shortRetention: 2 * time.Second,
		workers: 96,
	}
	if v := os.Getenv("IDEM_SOAK_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("IDEM_SOAK_TIME=%q: want a positive duration", v)
		}
		s.dur = d
	}
	if v := os.Getenv("IDEM_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_SOAK_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	switch v := os.Getenv("IDEM_SOAK_ATOMIC"); v {
	case "", "0":
	case "1":
		s.atomic = true
	default:
		t.Fatalf("IDEM_SOAK_ATOMIC=%q: want 1 or 0", v)
	}
	// Slow work lasts well past what a duplicate may wait for it.
	s.slow = s.waitBound() + 1500*time.Millisecond
	return s
}

// waitBound is how long a call that waits for another owner may take:
// the Store's wait, a Redis and a SQL call before it and after it, and
// slack for a loaded machine.
func (s soakSettings) waitBound() time.Duration {
	return s.wait + 2*(s.redisTimeout+s.sqlTimeout) + 1500*time.Millisecond
}

// cancelGrace is how long a stale owner may go on once another took its
// key over.
func (s soakSettings) cancelGrace() time.Duration {
	if s.atomic {
		return s.lease + s.lease/3 + s.sqlTimeout + 1500*time.Millisecond
	}
	return s.lease/3 + s.lease/8 + 1500*time.Millisecond
}

// checkOptions are the checker's options for this run's settings.
func (s soakSettings) checkOptions() history.Options {
	return history.Options{
		// A stale owner notices at its next renewal (a third of the
		// lease, one attempt of at most an eighth of it), plus slack; in
		// the atomic mode, at the next check of its transaction that the
		// server answers (a third of the lease, one statement of at most
		// the SQL timeout), or once no check has confirmed it for a whole
		// lease (the server unreachable, or no connection of the pool
		// free): the lease, a check and its statement after the last one
		// that confirmed it, which came before the transaction ended.
		CancelGrace: s.cancelGrace(),
		WaitBound:   s.waitBound(),
		// The bound counts a full timeout for each tier call a wait makes,
		// so a tier that is down or slow cannot carry a wait past it; only
		// the call's process being stopped can.
		Slowing: []history.FaultKind{history.ProcessPause},
		Retention: func(key string) time.Duration {
			if keyRoute(key) == routeShort {
				return s.shortRetention
			}
			return s.longRetention
		},
		ExpirySlack: s.lease,
	}
}

// keyRoute is the route of a key of the load: the short route's keys
// start with "s".
func keyRoute(key string) string {
	if len(key) > 0 && key[0] == 's' {
		return routeShort
	}
	return routeLong
}

var frameworks = []string{"gin", "echo", "chi"}

// mixedFramework is the framework whose instances run the standard mode in
// the atomic soak, on the same table as the atomic ones (a rollout's mixed
// modes): its duplicates of an atomic owner wait on the owner's open
// transaction and replay, and the atomic ones wait on its committed
// claims. It writes no charge: the ledger holds the atomic executions'.
const mixedFramework = "chi"

// TestSoak runs the payments API on Gin, Echo and chi, one child process
// each, over one Postgres (through a fault proxy) and one Redis under
// Sentinel, drives it with real HTTP for IDEM_SOAK_TIME while the nemesis
// injects every kind of fault, and records a history of every call, every
// run of the handler and every fault. After the faults, once every lease
// has lapsed, a quiet round calls every key once more; the stores are read
// directly; the children stop; and the history is checked. Any anomaly
// fails the test.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for seconds of load")
	}
	soak(t, soakSettingsFrom(t))
}

// TestSoakAtomic is the soak over Stores in the atomic mode (a short seed
// in make test; make soak SOAKATOMIC=1 runs it long): every execution
// writes its charge in the transaction that claims and completes its key,
// and the nemesis also kills owners' processes mid-transaction. The chi
// instances run the standard mode on the same table (mixedFramework).
func TestSoakAtomic(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for seconds of load")
	}
	set := soakSettingsFrom(t)
	set.atomic = true
	soak(t, set)
}

// soak is one run of the soak with set; it returns the history and the
// checker's report. Every anomaly fails the test, unless the run is on a
// formation with an asynchronous standby, whose losses the caller
// classifies.
func soak(t *testing.T, set soakSettings) (*history.History, *history.Report) {
	began := time.Now()
	dir := t.TempDir()

	var pg, pgVia *testenv.SQL
	var proxy *faultproxy.Proxy
	if set.pgaf != nil {
		pg = set.pgaf.sql
		pgVia = &testenv.SQL{Kind: pg.Kind, DSN: pg.DSN, Real: true}
	} else {
		pg = testenv.Postgres(t)
		pgVia, proxy = testenv.PostgresViaProxy(t)
	}
	// database/sql opens connections on one goroutine, under no deadline
	// of a call's: without a connect timeout, one connect the black hole
	// swallows holds every later one of the pool, for ever.
	pgVia.DSN += "&connect_timeout=1"
	rs := testenv.StartRedisSentinel(t)
	st := stacktest.On(t, "soak", &testenv.Redis{Options: rs.Servers()[0].Options()}, pg)
	admin := st.DB(t)
	apps := testenv.Name("idemsoak")
	ledger := createLedger(t, admin)
	ends := soakEndings(set.atomic)

	recFile, err := os.Create(filepath.Join(dir, "client.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recFile.Close() })
	rec := history.NewRecorder(recFile, "client", nil)

	procs := &procSet{}
	for _, fw := range frameworks {
		node := fw + "1"
		procs.live = append(procs.live, startProc(t, dir, childConfig{
			Node: node, Framework: fw, History: filepath.Join(dir, node+".jsonl"),
			DSN:           testenv.WithApplicationName(t, pgVia, apps+"_"+node).DSN,
			SentinelAddrs: rs.SentinelAddrs(), MasterName: rs.MasterName(),
			Prefix: st.Prefix, Records: st.Records, Events: st.Events, Versions: st.Versions,
			Lease: set.lease, Wait: set.wait, RedisTimeout: set.redisTimeout, SQLTimeout: set.sqlTimeout,
			LongRetention: set.longRetention, ShortRetention: set.shortRetention, Slow: set.slow,
			Seed: set.seed, Endings: ends, Ledger: ledger, Atomic: set.atomic && fw != mixedFramework,
		}))
	}
	for _, p := range procs.live {
		p.ready(t)
	}
	l := newLoad(rec, procs, set)
	t.Cleanup(l.close)
	n := &nemesis{t: t, set: set, rec: rec, rs: rs, admin: admin, proxy: proxy, apps: apps, procs: procs, load: l, dir: dir}

	// The load and two of the nemesis's tracks run on goroutines of their
	// own; the Redis track on this one. Whatever happens, they stop before
	// the children are killed (cleanups run last registered first).
	ctx, stop := context.WithCancel(context.Background())
	var loadWG, tracks sync.WaitGroup
	t.Cleanup(func() {
		stop()
		tracks.Wait()
		loadWG.Wait()
	})
	start := time.Now()
	setup := time.Since(began)
	loadWG.Go(func() { l.run(ctx, set.workers, start.Add(set.dur-set.slow)) })
	if os.Getenv("IDEM_SOAK_NEMESIS") != "off" { // off: to tell the load's own trouble from the faults'
		tracks.Go(func() { n.postgresTrack(ctx, start) })
		tracks.Go(func() { n.processTrack(ctx, start) })
		n.redisTrack(ctx, start)
		tracks.Wait()
	}
	sleepCtx(ctx, time.Until(start.Add(set.dur)))
	stop()
	loadWG.Wait()
	loaded := time.Since(start)
	if err := n.err(); err != nil {
		t.Errorf("nemesis: %v", err)
	}

	// Every fault is lifted (each track lifts its own); the work clients
	// gave up on ends; every lease, and its grace, lapses; every
	// transaction a black hole cut off ends (see awaitAbandoned); then
	// every key is called once more.
	settle := time.Now()
	settleDB := dbNow(t, admin)
	for _, p := range procs.all() {
		if err := p.idle(2 * set.slow); err != nil {
			t.Error(err)
		}
	}
	time.Sleep(set.lease + set.lease/4 + set.lease/2)
	if held := awaitAbandoned(t, admin, apps, settleDB); held > 0 {
		t.Logf("soak: waited %v for transactions whose connections the black hole had cut to end", held.Round(time.Millisecond))
	}
	settled := time.Since(settle)
	quiet := time.Now()
	l.quiet(context.Background(), set.seed, 24)
	quietTook := time.Since(quiet)

	end := time.Now()
	stacks := map[string][]byte{} // the children's goroutines, for a failed run's report
	for _, p := range procs.all() {
		stacks[p.node], _ = p.command(context.Background(), http.MethodGet, "/stacks")
	}
	finals := readFinals(t, admin, st, rs, ledger, l.allKeys())
	var exits sync.WaitGroup
	for _, p := range procs.all() {
		exits.Go(func() { p.exit(t) })
	}
	exits.Wait()
	if err := rec.Err(); err != nil {
		t.Fatalf("client recorder: %v", err)
	}
	files := []string{recFile.Name()}
	for _, p := range append(procs.all(), procs.killed()...) {
		files = append(files, p.history)
	}
	h := assemble(t, files, finals)
	r := history.Check(h, set.checkOptions())
	ended := time.Since(end)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	mode := ""
	if set.atomic {
		mode = " (atomic)"
	}
	lossy := set.pgaf != nil && set.pgaf.async
	if set.pgaf != nil {
		mode += fmt.Sprintf(" on pg_auto_failover, %s standby", map[bool]string{true: "asynchronous", false: "synchronous"}[set.pgaf.async])
	}
	report := t.Errorf
	if lossy { // the caller classifies them
		report = t.Logf
	}
	t.Logf("soak%s: seed %d, wall %v: setup %v, load %v (%d calls, %.0f/s), settling %v, quiet round %v, reading, stopping and checking %v\n%s",
		mode, set.seed, ms(time.Since(began)), ms(setup), ms(loaded), l.calls.Load(), float64(l.calls.Load())/loaded.Seconds(),
		ms(settled), ms(quietTook), ms(ended), r.Summary)
	if by := anomaliesByEnding(h, r.Anomalies); by != "" {
		t.Logf("anomalies by the endings of the keys' executions: %s", by)
	}
	if others := otherErrors(h, 5); others != "" {
		t.Logf("the commonest other errors: %s", others)
	}
	told := map[history.Kind]int{}
	for _, a := range r.Anomalies {
		if told[a.Kind]++; told[a.Kind] <= 3 { // the first of each kind with the key's story
			report("anomaly: %s\n%s", describe(a), timeline(h, a.Key, 60))
		} else {
			report("anomaly: %s", describe(a))
		}
	}
	if dir := os.Getenv("IDEM_SOAK_KEEP"); dir != "" && len(r.Anomalies) > 0 {
		keep(t, h, filepath.Join(dir, fmt.Sprintf("soak-%d-%s.jsonl", set.seed, time.Now().Format("150405"))))
	}
	if t.Failed() {
		for _, p := range append(procs.all(), procs.killed()...) {
			t.Logf("%s's log:\n%s", p.node, p.logTail())
		}
		for node, s := range stacks {
			if len(s) > 0 {
				t.Logf("%s's goroutines in the library at the end:\n%.20000s", node, s)
			}
		}
	}
	want := times(set.dur)
	if set.dur >= time.Minute {
		want = max(want, 5)
	}
	kinds := nemesisKinds
	if set.atomic {
		kinds = append(slices.Clone(kinds), history.ProcessKill)
	}
	if set.pgaf != nil { // the formation's faults in place of the proxy's
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k history.FaultKind) bool {
			return k == history.PostgresKill || k == history.PostgresBlackhole
		})
	}
	for _, k := range kinds {
		if got := r.Summary.Faults[k]; got < want {
			t.Errorf("%s injected %d times, want at least %d", k, got, want)
		}
	}
	if set.pgaf != nil {
		for _, k := range pgafKinds {
			if got, want := r.Summary.Faults[k], pgafRounds(set.dur); got < want {
				t.Errorf("%s injected %d times, want at least %d", k, got, want)
			}
		}
	}
	if set.dur >= time.Minute { // a short seed is too short for the rare rows
		for _, e := range ends {
			if got := r.Summary.Endings[e]; got < 5 {
				t.Errorf("%d executions ended %s, want at least 5", got, e)
			}
		}
	}
	return h, r
}

// anomaliesByEnding counts the anomalies per ending of their key's
// executions: which rows of the handler-ending table they came with.
func anomaliesByEnding(h *history.History, as []history.Anomaly) string {
	endsOf := map[string]map[string]bool{}
	for _, e := range h.Execs {
		if endsOf[e.Key] == nil {
			endsOf[e.Key] = map[string]bool{}
		}
		if e.Ending != "" && e.Ending != endKept {
			endsOf[e.Key][e.Ending] = true
		}
	}
	count := map[string]int{}
	for _, a := range as {
		if len(endsOf[a.Key]) == 0 {
			count["kept only"]++
		}
		for e := range endsOf[a.Key] {
			count[e]++
		}
	}
	parts := make([]string, 0, len(count))
	for e, n := range count {
		parts = append(parts, fmt.Sprintf("%s %d", e, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// createLedger creates the table of the charges that commit with their
// key's record (a row per committed execution), and drops it when the
// test ends.
func createLedger(t *testing.T, admin *bun.DB) string {
	t.Helper()
	name := testenv.Name("idemledger")
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE TABLE "+name+" (exec TEXT PRIMARY KEY, key TEXT NOT NULL, call TEXT NOT NULL)"); err != nil {
		t.Fatalf("create the ledger: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name) })
	return name
}

// nemesisKinds are the faults every run injects.
var nemesisKinds = []history.FaultKind{
	history.RedisPause, history.RedisFlush, history.RedisRestart, history.SentinelFailover,
	history.PostgresKill, history.PostgresBlackhole, history.ProcessPause, history.ClockSkew,
	history.SlowCompletion, history.SlowWork, history.WorkPanic, history.WorkError,
}

// describe renders an anomaly with the nemesis's faults around it (the
// load's behaviours, which are faults of one request each, left out
// unless they hit the anomaly's own calls).
func describe(a history.Anomaly) string {
	s := a.String()
	var around []string
	for _, f := range a.Faults {
		if f.Kind == history.SlowWork || f.Kind == history.WorkError || f.Kind == history.WorkPanic {
			continue
		}
		around = append(around, fmt.Sprintf("%s@%s %s", f.Kind, f.Node, f.Detail))
	}
	if len(around) > 0 {
		s += fmt.Sprintf("\n  nemesis around it: %v", around)
	}
	return s
}
