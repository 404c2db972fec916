package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// TestGalera runs idem on a three-node MariaDB Galera cluster of its own,
// every node taking writes: two Stores on different nodes claiming one
// key at once (Galera's certification conflict is a lost race, never a
// second execution), a duplicate on another node right after the owner's
// commit (with and without wsrep_sync_wait), and the soak with a node
// killed and restarted under the load, in the standard and the atomic
// mode. The cluster starts once for all of them. IDEM_GALERA_CALLS and
// IDEM_GALERA_KILLS size the soak (make infra-galera runs the long one).
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("the Galera scenarios start a cluster of three servers")
	}
	g := startGalera(t)
	t.Run("certification", func(t *testing.T) { testGaleraCertification(t, g) })
	t.Run("replica-read", func(t *testing.T) { testGaleraReplicaRead(t, g) })
	t.Run("soak", func(t *testing.T) {
		t.Run("standard", func(t *testing.T) { testGaleraSoak(t, g, false) })
		t.Run("atomic", func(t *testing.T) { testGaleraSoak(t, g, true) })
	})
}

// testGaleraCertification has two Stores, on nodes 1 and 2, claim each of
// many keys at the same moment, with no Redis in front: only the table
// decides. On two nodes the two INSERTs both succeed locally and meet at
// certification, where the later one fails (a deadlock at commit). The
// loser must read the winner's claim and wait for or replay its answer.
//
// In the standard mode the claim commits alone, before the work: the
// work runs once per key. In the atomic mode the claim commits with the
// work; with streaming replication of one row the claim locks the key on
// every node at once and the work runs once too. The layer turns it on for
// an atomic execution's session on a Galera node by itself: without it the
// two claims would meet only at commit, the work could run on both nodes,
// and what it did outside the transaction would happen twice.
func testGaleraCertification(t *testing.T, g *galera) {
	const keys = 150
	modes := []struct {
		name      string
		atomic    bool
		vars      map[string]string
		runsOnce  bool // the work itself runs once per key
		streaming bool
	}{
		{name: "standard", runsOnce: true},
		{name: "atomic-streaming", atomic: true, vars: streaming(), runsOnce: true},
		// No setting of the user's: the layer streams the atomic
		// execution's rows itself on a Galera node.
		{name: "atomic", atomic: true, runsOnce: true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			st := g.stack(t, "galera-cert")
			admin := g.sql(1, nil).Open(t)
			ledger := testenv.Name("galera_charges")
			mustExec(t, admin, "CREATE TABLE "+ledger+" (key_id VARCHAR(80) NOT NULL, exec_id VARCHAR(80) NOT NULL, PRIMARY KEY (key_id, exec_id))")
			g.settle(t, ledger)
			t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+ledger) })
			a := g.store(t, st, galeraStoreConfig{node: 1, atomic: m.atomic, vars: m.vars, wait: 10 * time.Second})
			b := g.store(t, st, galeraStoreConfig{node: 2, atomic: m.atomic, vars: m.vars, wait: 10 * time.Second})
			db1, db2 := g.sql(1, nil).Open(t), g.sql(2, nil).Open(t)
			conflicts := func() int64 {
				var n int64
				for _, db := range []*bun.DB{db1, db2} {
					n += g.status(t, db, "wsrep_local_cert_failures") + g.status(t, db, "wsrep_local_bf_aborts")
				}
				return n
			}
			before := conflicts()
			var twice, notCommitted atomic.Int64
			for i := range keys {
				key := idem.NewKey("galera-cert", testenv.Name(fmt.Sprintf("k%d", i)))
				var runs atomic.Int32
				work := func(ctx context.Context) ([]byte, error) {
					runs.Add(1)
					exec := testenv.Name("exec")
					if m.atomic {
						tx, ok := sqllayer.TxFrom(ctx)
						if !ok {
							return nil, errors.New("no atomic transaction")
						}
						if _, err := tx.ExecContext(ctx, "INSERT INTO "+ledger+" (key_id, exec_id) VALUES (?, ?)", key.String(), exec); err != nil {
							return nil, err
						}
					}
					return []byte(exec), nil
				}
				start := make(chan struct{})
				answers := make([][]byte, 2)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for j, s := range []*galeraStore{a, b} {
					wg.Go(func() {
						<-start
						for try := 0; try < 5; try++ {
							res, err := s.Do(t.Context(), key, "fp", work)
							if errors.Is(err, tiered.ErrNotCommitted) || errors.Is(err, sqllayer.ErrConflict) || errClass(err) == "mysql 1213" {
								// The atomic execution lost the race in the
								// work's own statement, at its completion or
								// at its commit: its transaction rolled back,
								// and a retry replays the winner.
								notCommitted.Add(1)
								continue
							}
							answers[j], errs[j] = res.Value, err
							return
						}
						errs[j] = errors.New("no answer in 5 tries")
					})
				}
				close(start)
				wg.Wait()
				for j, err := range errs {
					if err != nil {
						t.Fatalf("key %d: the Store on node %d: %v", i, j+1, err)
					}
				}
				if string(answers[0]) != string(answers[1]) {
					t.Fatalf("key %d: the two nodes' callers were told %q and %q", i, answers[0], answers[1])
				}
				if n := runs.Load(); n > 1 {
					if m.runsOnce {
						t.Fatalf("key %d: the work ran %d times", i, n)
					}
					twice.Add(1)
				}
				if m.atomic {
					var charges []string
					if err := admin.NewRaw("SELECT exec_id FROM "+ledger+" WHERE key_id = ?", key.String()).Scan(t.Context(), &charges); err != nil {
						t.Fatal(err)
					}
					if len(charges) != 1 || charges[0] != string(answers[0]) {
						t.Fatalf("key %d: committed charges %v, the callers were told %q", i, charges, answers[0])
					}
				}
			}
			lost := conflicts() - before
			t.Logf("galera certification (%s): %d keys claimed on two nodes at once; %d certification conflicts and brute-force aborts; "+
				"the work ran on both nodes for %d keys, %d atomic executions did not commit; every key answered once",
				m.name, keys, lost, twice.Load(), notCommitted.Load())
			if lost == 0 {
				t.Fatalf("no certification conflict in %d races: the two claims never met at commit, and the test proved nothing", keys)
			}
		})
	}
}

// testGaleraReplicaRead completes a key through a Store on node 1 and, as
// soon as the owner was answered, sends its duplicate through a Store on
// node 2: the duplicate must replay the owner's answer, never run the
// work. Each session setting of wsrep_sync_wait is measured twice: how
// often a plain SELECT on node 2 right after a commit on node 1 misses
// the row, and what the duplicate's call costs.
func testGaleraReplicaRead(t *testing.T, g *galera) {
	const rounds = 200
	for _, level := range []int{0, 1, 7} {
		t.Run(fmt.Sprintf("wsrep_sync_wait=%d", level), func(t *testing.T) {
			st := g.stack(t, "galera-read")
			owner := g.store(t, st, galeraStoreConfig{node: 1})
			dup := g.store(t, st, galeraStoreConfig{node: 2, vars: syncWait(level)})
			// The raw read, on a table of its own.
			w, r := g.sql(1, nil).Open(t), g.sql(2, syncWait(level)).Open(t)
			table := testenv.Name("galera_read")
			mustExec(t, w, "CREATE TABLE "+table+" (id INTEGER PRIMARY KEY)")
			g.settle(t, table)
			t.Cleanup(func() { _, _ = w.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) })
			missed := 0
			for i := range rounds {
				mustExec(t, w, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", table, i))
				var n int
				if err := r.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table+" WHERE id = ?", i).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					missed++
				}
			}
			if level > 0 && missed > 0 {
				t.Fatalf("wsrep_sync_wait=%d: %d of %d reads right after a commit on another node missed the row", level, missed, rounds)
			}
			var took []time.Duration
			var waited int
			for i := range rounds {
				key := idem.NewKey("galera-read", testenv.Name(fmt.Sprintf("k%d", i)))
				first, err := owner.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte(fmt.Sprintf("answer %d", i)), nil })
				if err != nil {
					t.Fatal(err)
				}
				began := time.Now()
				res, err := dup.Do(t.Context(), key, "fp", func(context.Context) ([]byte, error) { return []byte("a second execution"), nil })
				took = append(took, time.Since(began))
				switch {
				case err != nil:
					t.Fatalf("round %d: the duplicate on node 2: %v", i, err)
				case !res.Replayed || string(res.Value) != string(first.Value):
					t.Fatalf("round %d: the duplicate on node 2 got %q (replayed %v), the owner %q", i, res.Value, res.Replayed, first.Value)
				}
				if res.Waited {
					waited++
				}
			}
			slices.Sort(took)
			t.Logf("galera replica read (wsrep_sync_wait=%d): %d of %d plain reads on node 2 right after a commit on node 1 missed the row; "+
				"%d duplicates on node 2 replayed the owner's answer (%d after waiting), p50 %v, p99 %v",
				level, missed, rounds, rounds, waited, took[len(took)/2].Round(time.Microsecond), took[len(took)*99/100].Round(time.Microsecond))
		})
	}
}

func mustExec(t *testing.T, db *bun.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
