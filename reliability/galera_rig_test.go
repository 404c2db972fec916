package reliability_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// galera is a three-node MariaDB Galera cluster of the test's own, run by
// infra/galera.sh: every node accepts writes, on ports of its own.
type galera struct {
	script string
	env    []string
	port   int // node n listens on port+n
}

// galeraNodes is the cluster's size.
const galeraNodes = 3

// startGalera starts the cluster, stopped (and its data removed) when the
// test ends. A cluster that cannot start skips the test, and fails it
// under IDEM_REQUIRE_SERVICES=1.
func startGalera(t *testing.T) *galera {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("infra", "galera.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// The nodes run as the mysql user when the test runs as root: their
	// directory must be theirs to enter, which t.TempDir's is not.
	dir, err := os.MkdirTemp("", "idem-galera-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g := &galera{script: script, port: 13060, env: append(os.Environ(), "IDEM_GALERA_DIR="+filepath.Join(dir, "cluster"))}
	if v := os.Getenv("IDEM_GALERA_PORT"); v != "" {
		if _, err := fmt.Sscan(v, &g.port); err != nil {
			t.Fatalf("IDEM_GALERA_PORT=%q: %v", v, err)
		}
	}
	t.Cleanup(func() {
		if out, err := g.run(2*time.Minute, "stop"); err != nil {
			t.Errorf("stop the Galera cluster: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	began := time.Now()
	if out, err := g.run(3*time.Minute, "start"); err != nil {
		why := fmt.Sprintf("the Galera cluster did not start: %v\n%s", err, out)
		if testenv.Required() {
			t.Fatalf("galera is required (%s=1): %s", testenv.EnvRequire, why)
		}
		t.Skip(why)
	}
	t.Logf("galera: 3 nodes synced in %v", time.Since(began).Round(100*time.Millisecond))
	return g
}

// run runs the script with args, bounded by limit.
func (g *galera) run(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{g.script}, args...)...)
	cmd.Env = g.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kill stops node n with SIGKILL.
func (g *galera) kill(n int) error {
	if out, err := g.run(30*time.Second, "kill", fmt.Sprint(n)); err != nil {
		return fmt.Errorf("kill node %d: %v: %s", n, err, out)
	}
	return nil
}

// restart starts node n again and waits until it is synced.
func (g *galera) restart(n int) error {
	if out, err := g.run(3*time.Minute, "restart", fmt.Sprint(n)); err != nil {
		return fmt.Errorf("restart node %d: %v: %s", n, err, out)
	}
	return nil
}

// sql returns node n (1-3) as a backend, its sessions set with the given
// system variables (go-sql-driver sends each as SET name=value).
func (g *galera) sql(n int, vars map[string]string) *testenv.SQL {
	q := url.Values{"parseTime": {"true"}, "loc": {"UTC"}}
	for k, v := range vars {
		q.Set(k, v)
	}
	return &testenv.SQL{Kind: "mysql", DSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?%s", g.port+n, q.Encode()), Real: true}
}

// syncWait is the session setting that makes every read on a node wait
// until the node has applied what the cluster committed before it
// (wsrep_sync_wait=1: reads; 3: reads, updates and deletes; 7: inserts
// too).
func syncWait(level int) map[string]string {
	return map[string]string{"wsrep_sync_wait": fmt.Sprint(level)}
}

// streaming is the session setting with which a transaction replicates
// each row it writes at once (Galera 4's streaming replication): the row
// is locked on every node, as InnoDB locks it on one, so a claim in an
// atomic execution's transaction holds the key cluster-wide while the
// work runs, not only at its commit.
func streaming() map[string]string {
	return map[string]string{"wsrep_trx_fragment_unit": "'rows'", "wsrep_trx_fragment_size": "1"}
}

// status reads a numeric wsrep status variable of node n.
func (g *galera) status(t *testing.T, db *bun.DB, name string) int64 {
	t.Helper()
	var k string
	var v int64
	if err := db.QueryRowContext(t.Context(), "SHOW GLOBAL STATUS LIKE ?", name).Scan(&k, &v); err != nil {
		t.Fatalf("SHOW STATUS %s: %v", name, err)
	}
	return v
}

// galeraStore is a Store on one node of the cluster, over the stack's
// tables: with Redis in front or not, in the atomic mode or not.
type galeraStore struct {
	*tiered.Store
	node int
	name string
}

type galeraStoreConfig struct {
	node      int
	redis     bool
	atomic    bool
	vars      map[string]string
	lease     time.Duration
	wait      time.Duration
	observer  func(ctx context.Context, e idem.Event)
	maxConns  int
	storeName string
}

func (g *galera) store(t *testing.T, st *stacktest.Stack, c galeraStoreConfig) *galeraStore {
	t.Helper()
	db := g.sql(c.node, c.vars).Open(t)
	if c.maxConns > 0 {
		db.SetMaxOpenConns(c.maxConns)
	}
	l, err := sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions))
	if err != nil {
		t.Fatal(err)
	}
	opts := []tiered.Option{tiered.WithSQL(l), tiered.WithAtomic(c.atomic), tiered.WithTimeouts(time.Second, 5*time.Second)}
	if c.lease > 0 {
		opts = append(opts, tiered.WithLease(c.lease))
	}
	if c.wait > 0 {
		opts = append(opts, tiered.WithWait(c.wait))
	}
	if c.redis {
		opts = append(opts, tiered.WithRedis(st.RedisLayer(t)))
	}
	if c.observer != nil {
		opts = append(opts, tiered.WithObserver(idem.ObserverFunc(c.observer)))
	}
	s, err := tiered.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	name := c.storeName
	if name == "" {
		name = fmt.Sprintf("n%d", c.node)
	}
	return &galeraStore{Store: s, node: c.node, name: name}
}

// galeraStack is the test's tables, created through node 1 (DDL
// replicates to every node), and a Redis prefix of its own.
func (g *galera) stack(t *testing.T, name string) *stacktest.Stack {
	t.Helper()
	st := stacktest.On(t, name, testenv.AnyRedis(t), g.sql(1, nil))
	g.settle(t, st.Records, st.Events, st.Versions)
	return st
}

// settle waits until every node has the tables: a DDL statement runs on
// every node in the cluster's order (total order isolation), but a node
// that has not applied it yet answers "no such table" to a plain
// statement. A read under wsrep_sync_wait waits for it.
func (g *galera) settle(t *testing.T, tables ...string) {
	t.Helper()
	for n := 1; n <= galeraNodes; n++ {
		db := g.sql(n, syncWait(1)).Open(t)
		for _, table := range tables {
			var c int
			if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&c); err != nil || c != 1 {
				t.Fatalf("node %d: table %s: %d found, %v", n, table, c, err)
			}
		}
		_ = db.Close()
	}
}

// lines joins counts as "name n" in name order.
func lines(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(out, ", ")
}
