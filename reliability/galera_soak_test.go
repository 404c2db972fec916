package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/sqllayer"
)

// galeraKill is the soak's fault: a node of the cluster killed (SIGKILL)
// at Start, restarted and synced again at End.
const galeraKill history.FaultKind = "galera-kill"

// galeraSoakSize is the soak's size: IDEM_GALERA_CALLS calls (1,500 by
// default, the short seed of make test) and IDEM_GALERA_KILLS node kills
// (1 by default) per mode, seeded by IDEM_SOAK_SEED.
func galeraSoakSize(t *testing.T) (calls, kills int, seed uint64) {
	t.Helper()
	calls, kills, seed = 1500, 1, 1
	for env, p := range map[string]*int{"IDEM_GALERA_CALLS": &calls, "IDEM_GALERA_KILLS": &kills} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a number", env, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("IDEM_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_SOAK_SEED=%q: %v", v, err)
		}
		seed = n
	}
	return calls, kills, seed
}

// testGaleraSoak spreads six Stores over the three nodes (two a node, one
// of them behind Redis) and has clients call them with new keys and
// retries of recent ones, each retry through any Store, while a nemesis
// kills a node and restarts it. Every call and execution is recorded; at
// the end, after a quiet round that calls every key once more, the
// history checker judges the run with the stores' final state. In the
// atomic mode every execution writes its charge in the transaction that
// claims and completes its key (the layer streams its rows to the cluster),
// and the checker holds the committed charges to the record.
func testGaleraSoak(t *testing.T, g *galera, atomicMode bool) {
	calls, kills, seed := galeraSoakSize(t)
	st := g.stack(t, "galera-soak")
	admin := g.sql(1, nil).Open(t)
	ledger := testenv.Name("galera_ledger")
	mustExec(t, admin, "CREATE TABLE "+ledger+" (exec VARCHAR(80) PRIMARY KEY, key_id VARCHAR(80) NOT NULL)")
	g.settle(t, ledger)
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+ledger) })
	dir := t.TempDir()
	var files []string
	recorder := func(node string) *history.Recorder {
		f, err := os.Create(filepath.Join(dir, node+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		files = append(files, f.Name())
		return history.NewRecorder(f, node, nil)
	}
	// No session setting of the test's: on a Galera node the layer
	// streams an atomic execution's rows itself.
	var vars map[string]string
	const lease = 4 * time.Second
	type soakStore struct {
		*galeraStore
		rec *history.Recorder
	}
	var stores []soakStore
	errCounts := map[string]int{}
	otherErrs := map[string]bool{} // a few of the callers' unclassified errors, to name them
	var errMu sync.Mutex
	for n := 1; n <= galeraNodes; n++ {
		for _, withRedis := range []bool{true, false} {
			name := fmt.Sprintf("n%d-%s", n, map[bool]string{true: "redis", false: "sql"}[withRedis])
			s := g.store(t, st, galeraStoreConfig{node: n, redis: withRedis, atomic: atomicMode, vars: vars, lease: lease,
				wait: 3 * time.Second, maxConns: 16, storeName: name,
				observer: func(ctx context.Context, e idem.Event) {
					if e.Kind == idem.EventTierError {
						errMu.Lock()
						errCounts[fmt.Sprintf("%v: %v", e.Tier, errClassOf(e.Err))]++
						errMu.Unlock()
					}
					if s, ok := ctx.Value(slotKey{}).(*slot); ok {
						s.observe(e, atomicMode)
					}
				}})
			stores = append(stores, soakStore{galeraStore: s, rec: recorder(name)})
		}
	}
	nemesis := recorder("nemesis")

	var (
		keysMu sync.Mutex
		keys   []string
	)
	pick := func(r *rand.Rand) string {
		keysMu.Lock()
		defer keysMu.Unlock()
		if len(keys) == 0 || r.IntN(3) == 0 {
			keys = append(keys, testenv.Name("pay"))
			return keys[len(keys)-1]
		}
		return keys[len(keys)-1-r.IntN(min(len(keys), 20))]
	}
	var slots sync.Map // *slot -> struct{}: executions whose completion may still be pending
	call := func(ctx context.Context, s soakStore, name string) (history.Outcome, error) {
		p := s.rec.Invoke(name, "fp")
		sl := &slot{}
		ctx = context.WithValue(ctx, slotKey{}, sl)
		res, err := s.Do(ctx, idem.NewKey("galera-soak", name), "fp", func(ctx context.Context) ([]byte, error) {
			x := p.ExecStart("")
			sl.started(x)
			slots.Store(sl, struct{}{})
			defer sl.ended()
			x.Watch(ctx, func(cause error) bool { return errors.Is(cause, idem.ErrLeaseLost) })
			v := []byte(x.ID() + " paid " + name)
			if atomicMode {
				tx, ok := sqllayer.TxFrom(ctx)
				if !ok {
					err := errors.New("no atomic transaction")
					x.End(nil, err)
					return nil, err
				}
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+ledger+" (exec, key_id) VALUES (?, ?)", x.ID(), name); err != nil {
					x.End(nil, err)
					return nil, err
				}
			}
			x.End(v, nil)
			return v, nil
		})
		out := outcomeOfDo(ctx, res, err, nil)
		p.Return(out, res.Value, err)
		return out, err
	}

	var (
		done     atomic.Bool
		made     atomic.Int64
		outcomes sync.Map // history.Outcome -> *atomic.Int64
		wg       sync.WaitGroup
	)
	count := func(o history.Outcome) {
		v, _ := outcomes.LoadOrStore(o, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	nemDone := make(chan error, 1)
	began := time.Now()
	go func() { nemDone <- galeraNemesis(g, nemesis, seed, kills, &made, int64(calls)) }()
	for w := range 12 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for !done.Load() {
				name := pick(r)
				s := stores[r.IntN(len(stores))]
				for try := 0; try < 20 && !done.Load(); try++ {
					made.Add(1)
					ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
					out, err := call(ctx, s, name)
					cancel()
					count(out)
					if out == history.OtherError {
						errMu.Lock()
						c := otherClass(err)
						errCounts["caller: "+c]++
						if c == "other" && len(otherErrs) < 5 {
							otherErrs[err.Error()] = true
						}
						errMu.Unlock()
					}
					if out.Succeeded() || out == history.Mismatch {
						break
					}
					s = stores[r.IntN(len(stores))] // the client retries, through any instance
				}
			}
		})
	}
	// The load runs until it made its calls and the nemesis its kills.
	var nemErr error
	for waiting := true; waiting; {
		select {
		case nemErr = <-nemDone:
			for made.Load() < int64(calls) {
				time.Sleep(50 * time.Millisecond)
			}
			waiting = false
		case <-t.Context().Done():
			waiting = false
		}
	}
	done.Store(true)
	wg.Wait()
	took := time.Since(began)
	if nemErr != nil {
		t.Fatalf("nemesis: %v", nemErr)
	}
	// The quiet round: once every lease lapsed, each key once more, so
	// that no claim of a caller that gave up stays behind.
	time.Sleep(lease + time.Second)
	keysMu.Lock()
	all := slices.Clone(keys)
	keysMu.Unlock()
	for i, name := range all {
		for try := 0; ; try++ {
			out, err := call(t.Context(), stores[i%len(stores)], name)
			if out.Succeeded() {
				break
			}
			if try == 10 {
				t.Fatalf("quiet round: %s: %v", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	slots.Range(func(k, _ any) bool { k.(*slot).flushPending(); return true })
	for _, s := range stores {
		if err := s.rec.Err(); err != nil {
			t.Fatal(err)
		}
	}
	finals := galeraFinals(t, admin, st, ledger, all, atomicMode)
	h := mergeHistory(t, files, finals)
	rep := history.Check(h, history.Options{})
	byOutcome := map[string]int{}
	outcomes.Range(func(k, v any) bool {
		byOutcome[k.(history.Outcome).String()] = int(v.(*atomic.Int64).Load())
		return true
	})
	errMu.Lock()
	tierErrs := lines(errCounts)
	errMu.Unlock()
	// A key run again: in the standard mode an owner that could not
	// complete while its node was away past its lease (the earlier run
	// fenced); in the atomic mode a run whose transaction was lost with
	// its node (nothing of it committed).
	again := "keys run again after an owner's lease lapsed (the earlier run fenced)"
	if atomicMode {
		again = "keys run again after a run's transaction was lost with its node (one committed)"
	}
	t.Logf("galera soak (%s): seed %d, %d calls on %d keys in %v (%.0f calls/s), %d executions, %d %s, %d node kills; outcomes: %s; errors: %s; %d anomalies",
		map[bool]string{true: "atomic", false: "standard"}[atomicMode], seed, made.Load(), len(all), took.Round(time.Millisecond),
		float64(made.Load())/took.Seconds(), len(h.Execs), rerunKeys(h), again, countFaults(h, galeraKill), lines(byOutcome), tierErrs, len(rep.Anomalies))
	for e := range otherErrs {
		t.Logf("a caller's unclassified error: %s", e)
	}
	for i, a := range rep.Anomalies {
		if i == 20 {
			t.Errorf("… and %d more anomalies", len(rep.Anomalies)-20)
			break
		}
		t.Errorf("anomaly: %s\n%s", a, timeline(h, a.Key, 30))
	}
	if got := countFaults(h, galeraKill); got < kills {
		t.Errorf("the nemesis killed %d nodes, want %d", got, kills)
	}
}

// galeraNemesis kills a random node kills times, each time restarting it
// after a moment and waiting until it is synced, spread over the run:
// the first after a tenth of the calls, the next when the cluster has
// run whole for a few seconds.
func galeraNemesis(g *galera, rec *history.Recorder, seed uint64, kills int, made *atomic.Int64, calls int64) error {
	r := rand.New(rand.NewPCG(seed, 0xa11))
	per := calls / int64(kills+1)
	for i := range kills {
		for made.Load() < per*int64(i)+per/2 {
			time.Sleep(20 * time.Millisecond)
		}
		n := 1 + r.IntN(galeraNodes)
		f := rec.Fault(galeraKill, "", fmt.Sprintf("node %d", n))
		if err := g.kill(n); err != nil {
			return err
		}
		time.Sleep(time.Duration(500+r.IntN(2500)) * time.Millisecond)
		if err := g.restart(n); err != nil {
			return err
		}
		f.End()
		time.Sleep(time.Duration(1000+r.IntN(2000)) * time.Millisecond)
	}
	return nil
}
