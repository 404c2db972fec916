//go:build unix

package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// clusterSettings are the sizes and timings of one cluster soak run.
type clusterSettings struct {
	calls   int // the load makes at least this many calls
	faults  int // each fault kind comes at least this many times
	seed    uint64
	workers int

	lease, wait              time.Duration
	redisTimeout, sqlTimeout time.Duration
}

// clusterSettingsFrom reads IDEM_SOAK_CLUSTER_CALLS (2,000 by default: the
// short seed of make test), IDEM_SOAK_CLUSTER_FAULTS (1 of each kind by
// default) and IDEM_SOAK_SEED (1).
func clusterSettingsFrom(t *testing.T) clusterSettings {
	t.Helper()
	s := clusterSettings{calls: 2000, faults: 1, seed: 1, workers: 8,
		lease: 2 * time.Second, wait: 500 * time.Millisecond,
		redisTimeout: 300 * time.Millisecond, sqlTimeout: 2 * time.Second}
	for env, p := range map[string]*int{"IDEM_SOAK_CLUSTER_CALLS": &s.calls, "IDEM_SOAK_CLUSTER_FAULTS": &s.faults} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", env, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("IDEM_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_SOAK_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	return s
}

// waitBound is how long a call that waits for another owner may take: the
// Store's wait, a Redis and a SQL call before it and after it, and slack
// for a loaded machine.
func (s clusterSettings) waitBound() time.Duration {
	return s.wait + 2*(s.redisTimeout+s.sqlTimeout) + 1500*time.Millisecond
}

// switchSpan is one fault of the nemesis: from its start to when the
// cluster served every slot again (to).
type switchSpan struct {
	kind     history.FaultKind
	from, to int64
}

// TestSoakRedisCluster runs three service instances, each a Store over a
// Redis Cluster client of its own (three masters with a replica each,
// cluster-require-full-coverage yes) and a pool of its own on Postgres,
// under a load of new keys, retries, concurrent duplicates on two
// instances, retries with another fingerprint and failing work, while a
// nemesis kills a master (SIGKILL: its replica is elected, and the killed
// node restarts empty and rejoins as a replica) and forces CLUSTER
// FAILOVER on a replica, in turn, IDEM_SOAK_CLUSTER_FAULTS times each.
// Once the faults are over and IDEM_SOAK_CLUSTER_CALLS calls made, and
// every lease has lapsed, a quiet round calls every key once more; the
// stores are read directly, and the history's checker must find no
// anomaly. It reports the share of the calls that fell back to SQL (their
// Redis call failed, or the Store had switched Redis off) during the
// switches and outside them.
func TestSoakRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster soak runs for seconds of failovers")
	}
	set := clusterSettingsFrom(t)
	began := time.Now()
	dir := t.TempDir()
	rc := testenv.StartRedisClusterReplicated(t)
	pg := testenv.Postgres(t)
	admin := pg.Open(t)
	records := testenv.Name("idem_crec")
	prefix := testenv.Prefix()
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := must.Get(sqllayer.New(admin, sqllayer.WithRecordsTable(records)))(t).Init(ictx); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+records) })

	nodes := startClusterNodes(t, set, rc, pg, prefix, records, dir, 3)
	nf, err := os.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nf.Close() })
	nrec := history.NewRecorder(nf, "nemesis", nil)
	l := &clusterLoad{nodes: nodes}
	setup := time.Since(began)

	ctx, stop := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	t.Cleanup(func() { stop(); workers.Wait() })
	start := time.Now()
	for w := range set.workers {
		r := rand.New(rand.NewPCG(set.seed, uint64(w)))
		workers.Go(func() { l.run(ctx, r) })
	}
	// The nemesis, on the test's goroutine (the cluster's helpers fail the
	// test when the cluster does not heal): a kill, then a failover, each
	// after a few seconds of load.
	r := rand.New(rand.NewPCG(set.seed, 1000))
	var switches []switchSpan
	for range set.faults {
		for _, kind := range []history.FaultKind{history.ClusterMasterKill, history.ClusterFailover} {
			time.Sleep(time.Duration(1000+r.IntN(2000)) * time.Millisecond) // load between faults
			masters, replicas, err := rc.Roles(ctx)
			if err != nil {
				t.Fatalf("cluster roles: %v", err)
			}
			if len(masters) == 0 || len(replicas) == 0 {
				t.Fatalf("cluster roles: %d masters, %d replicas", len(masters), len(replicas))
			}
			i := r.IntN(min(len(masters), len(replicas)))
			switch kind {
			case history.ClusterMasterKill:
				f := nrec.Fault(kind, "", "master "+masters[i].Addr())
				from := time.Now()
				replaced := rc.KillMaster(t, masters[i])
				f.End()
				switches = append(switches, switchSpan{kind, from.UnixNano(), replaced.UnixNano()})
				t.Logf("killed master %s: replaced after %v, healed after %v", masters[i].Addr(),
					replaced.Sub(from).Round(time.Millisecond), time.Since(from).Round(time.Millisecond))
			case history.ClusterFailover:
				f := nrec.Fault(kind, "", "replica "+replicas[i].Addr())
				from := time.Now()
				rc.Failover(t, replicas[i])
				f.End()
				switches = append(switches, switchSpan{kind, from.UnixNano(), time.Now().UnixNano()})
				t.Logf("failed over to %s in %v", replicas[i].Addr(), time.Since(from).Round(time.Millisecond))
			}
		}
	}
	for l.calls.Load() < int64(set.calls) {
		time.Sleep(50 * time.Millisecond) // until the load has made its calls
	}
	stop()
	workers.Wait()
	loaded := time.Since(start)

	// Every lease and its grace lapses; then every key is called once more.
	time.Sleep(set.lease + set.lease/2)
	l.quiet(context.Background(), set.seed)
	for _, n := range nodes {
		n.flush()
	}
	finals := clusterFinals(t, admin, rc, prefix, records, l.keys)
	files := []string{nf.Name()}
	for _, n := range nodes {
		if err := n.rec.Err(); err != nil {
			t.Fatalf("%s's recorder: %v", n.name, err)
		}
		files = append(files, n.file)
	}
	h := assemble(t, files, finals)
	rep := history.Check(h, history.Options{
		CancelGrace: set.lease/3 + set.lease/8 + 1500*time.Millisecond,
		WaitBound:   set.waitBound(),
		Retention:   func(string) time.Duration { return time.Hour },
		ExpirySlack: set.lease,
	})
	t.Logf("cluster soak: seed %d, wall %v: setup %v, load %v (%d calls, %d keys, %.0f/s)\n%s",
		set.seed, time.Since(began).Round(time.Millisecond), setup.Round(time.Millisecond), loaded.Round(time.Millisecond),
		l.calls.Load(), len(l.keys), float64(l.calls.Load())/loaded.Seconds(), rep.Summary)
	t.Log(fallbackReport(l.spans, switches))
	for _, a := range rep.Anomalies {
		t.Errorf("anomaly: %s\n%s", describe(a), timeline(h, a.Key, 40))
	}
	if others := otherErrors(h, 5); others != "" {
		t.Logf("the commonest other errors: %s", others)
	}
	for _, k := range []history.FaultKind{history.ClusterMasterKill, history.ClusterFailover} {
		if got := rep.Summary.Faults[k]; got < set.faults {
			t.Errorf("%s injected %d times, want %d", k, got, set.faults)
		}
	}
	if got := l.calls.Load(); got < int64(set.calls) {
		t.Errorf("%d calls, want at least %d", got, set.calls)
	}
}

// fallbackReport counts, per kind of switch, the calls that overlapped a
// switch (from its start to when the cluster served every slot again) and
// the share of them that fell back to SQL; the same for the calls of the
// Store's Redis cool-down after a switch (a Store that switched Redis off
// probes it again after tiered.DefaultRedisCooldown); and the rest.
func fallbackReport(spans []callSpan, switches []switchSpan) string {
	after := int64(tiered.DefaultRedisCooldown + time.Second)
	type tally struct{ calls, fell int }
	by := map[string]*tally{}
	var down time.Duration
	per := map[history.FaultKind][]time.Duration{}
	for _, s := range switches {
		per[s.kind] = append(per[s.kind], time.Duration(s.to-s.from))
		down += time.Duration(s.to - s.from)
	}
	for _, c := range spans {
		name := "outside the switches"
		for _, s := range switches {
			if c.invoke <= s.to && c.ret >= s.from {
				name = "during " + string(s.kind)
				break
			}
			if c.invoke <= s.to+after && c.ret > s.to {
				name = "in the cool-down after " + string(s.kind)
			}
		}
		if by[name] == nil {
			by[name] = &tally{}
		}
		by[name].calls++
		if c.fellBack {
			by[name].fell++
		}
	}
	out := "fallback to SQL:"
	names := make([]string, 0, len(by))
	for name := range by {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := by[name]
		out += fmt.Sprintf("\n  %s: %d of %d calls (%.1f%%)", name, t.fell, t.calls, 100*float64(t.fell)/float64(max(t.calls, 1)))
	}
	for _, k := range []history.FaultKind{history.ClusterMasterKill, history.ClusterFailover} {
		ds := per[k]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		out += fmt.Sprintf("\n  %s: %d switches, median %v, longest %v until every slot was served", k, len(ds),
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	return out
}
