//go:build unix

package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/reliability/internal/history"
)

// The fault kinds of a pg_auto_failover formation's nemesis.
const (
	// PostgresSwitchover is pg_autoctl perform failover: the primary
	// demoted, the standby promoted, the old primary following it.
	PostgresSwitchover history.FaultKind = "postgres-switchover"
	// PostgresPrimaryKill is the primary's node lost: its pg_autoctl and
	// its Postgres SIGKILLed, the standby promoted by the monitor, the
	// old primary restarted as a standby (rewound).
	PostgresPrimaryKill history.FaultKind = "postgres-primary-kill"
	// PostgresCrash is the primary's Postgres SIGKILLed alone: its
	// pg_autoctl restarts it in place, after crash recovery.
	PostgresCrash history.FaultKind = "postgres-crash"
)

// pgafOutage bounds how long a fault of the formation leaves it without
// a primary that takes writes: the monitor's detection of a dead
// primary, its demote timeout and the promotion.
const pgafOutage = 40 * time.Second

// pgafKinds are the faults of the formation's track, in a round's order.
var pgafKinds = []history.FaultKind{PostgresSwitchover, PostgresPrimaryKill, PostgresCrash}

// pgaf is a pg_auto_failover formation of this test's, run by
// infra/pgaf.sh: a monitor and two Postgres nodes on ports of their own.
type pgaf struct {
	dir   string       // the formation's data and logs
	sql   *testenv.SQL // the multi-host DSN, the primary's session
	async bool         // the standby asynchronous
	// lag is how long the standby's WAL receiver is stopped before a
	// primary is killed: the standby behind by that much of the
	// primary's commits (0: as far behind as it happens to be).
	lag time.Duration
}

// setMode makes the standby synchronous or (async) asynchronous.
func (c *pgaf) setMode(t *testing.T, async bool) {
	t.Helper()
	mode := map[bool]string{true: "async", false: "sync"}[async]
	if out, err := c.script("mode", mode); err != nil {
		t.Fatalf("pgaf mode %s: %v\n%s", mode, err, out)
	}
	c.async = async
}

// startPGAF starts a formation with a synchronous (or, async, an
// asynchronous) standby and returns it; it stops
// it when the test ends, keeping its logs in IDEM_PGAF_KEEP when that is
// set. A formation that cannot start skips the test, or fails it under
// IDEM_REQUIRE_SERVICES=1.
func startPGAF(t *testing.T, async bool) *pgaf {
	t.Helper()
	if _, err := exec.LookPath("runuser"); err != nil && os.Getuid() == 0 {
		pgafMissing(t, "no runuser to run pg_autoctl as postgres")
	}
	dir, err := os.MkdirTemp("", "idem-pgaf-")
	if err != nil {
		t.Fatal(err)
	}
	// The formation's processes run as postgres: its directory is theirs.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &pgaf{dir: dir, async: async}
	t.Cleanup(func() {
		if out, err := c.script("stop"); err != nil {
			t.Errorf("pgaf stop: %v\n%s", err, out)
		}
		if keep := os.Getenv("IDEM_PGAF_KEEP"); keep != "" {
			for _, f := range []string{"monitor.log", "node1.log", "node2.log", "monitor.create.log", "node1.create.log", "node2.create.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
					_ = os.WriteFile(filepath.Join(keep, filepath.Base(dir)+"-"+f), b, 0o644)
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	mode := "sync"
	if async {
		mode = "async"
	}
	if out, err := c.script("start", mode); err != nil {
		pgafMissing(t, fmt.Sprintf("%v\n%s", err, out))
	}
	out, err := c.script("dsn")
	if err != nil {
		t.Fatalf("pgaf dsn: %v\n%s", err, out)
	}
	c.sql = &testenv.SQL{Kind: "postgres", DSN: strings.TrimSpace(out), Real: true}
	return c
}

func pgafMissing(t *testing.T, why string) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf("a pg_auto_failover formation is required (%s=1) but did not start: %s", testenv.EnvRequire, why)
	}
	t.Skipf("a pg_auto_failover formation did not start: %s", why)
}

// script runs infra/pgaf.sh with a command on the formation's directory.
func (c *pgaf) script(cmd string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	x := exec.CommandContext(ctx, "bash", append([]string{filepath.Join("infra", "pgaf.sh"), cmd, c.dir}, args...)...)
	var out bytes.Buffer
	x.Stdout, x.Stderr = &out, &out
	err := x.Run()
	return out.String(), err
}

// pgafRounds is how many rounds of the formation's faults a run of dur
// has: one per 30 s, at least one; five from a two-minute run up.
func pgafRounds(dur time.Duration) int {
	n := max(1, int(dur/(30*time.Second)))
	if dur >= 2*time.Minute {
		n = max(n, 5)
	}
	return n
}

// pgafTrack switches the primary over, kills its node and crashes its
// Postgres in turn; in the asynchronous mode a kill loses what the
// standby had not received.
func (n *nemesis) pgafTrack(ctx context.Context, start time.Time) {
	r := rand.New(rand.NewPCG(n.set.seed, 2))
	plan := repeat(pgafRounds(n.set.dur), pgafKinds...)
	schedule(ctx, r, start, n.set.dur, plan, func(_ int, kind history.FaultKind) {
		c := n.set.pgaf
		primary, err := c.script("primary")
		if err != nil {
			n.fail(fmt.Errorf("pgaf primary: %w: %s", err, primary))
			return
		}
		var out string
		f := n.rec.Fault(kind, "", "primary "+strings.TrimSpace(primary))
		switch kind {
		case PostgresSwitchover:
			out, err = c.script("failover")
		case PostgresPrimaryKill:
			var lag []string
			if c.lag > 0 {
				lag = append(lag, fmt.Sprint(c.lag.Seconds()))
			}
			out, err = c.script("kill-primary", lag...)
		case PostgresCrash:
			out, err = c.script("crash-primary")
		}
		f.End()
		if err != nil {
			n.fail(fmt.Errorf("pgaf %s: %w\n%s", kind, err, out))
		}
		n.t.Logf("pgaf: %s", strings.TrimSpace(out))
	})
}

// TestSoakFailover is the soak on a pg_auto_failover formation (a
// monitor and two nodes, started by infra/pgaf.sh), the children
// connecting with its multi-host DSN (target_session_attrs=read-write),
// while the nemesis switches the primary over, kills its node (the
// standby promoted) and crashes its Postgres, beside the soak's Redis and
// process faults. Three runs on one formation:
//
//   - sync: a synchronous standby, the standard mode: no anomaly.
//   - sync-atomic: the same, the atomic mode (chi on the standard mode on
//     the same table): no anomaly.
//   - async: an asynchronous standby whose WAL receiver is stopped for a
//     second before each kill, so that the promoted standby lacks the
//     primary's last commits: the checker's anomalies are what those
//     lost commits cost, counted and logged; each must be one a lost
//     commit explains (a kind that a rolled-back completion or claim
//     yields, around a kill).
//
// IDEM_SOAK_TIME sets each run's length: by default 12 s (the short seed
// of make test: one round of the formation's faults, sync-atomic only);
// with it, all three runs. IDEM_PGAF_RUNS lists the runs
// instead; IDEM_PGAF_LAG sets how long the standby lags before a kill
// (0 in the synchronous runs, 1 s in the asynchronous one);
// IDEM_SOAK_SEED seeds it.
func TestSoakFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for seconds of load")
	}
	runs := []string{"sync-atomic"} // the short seed's: about 70 s with the formation's start
	if os.Getenv("IDEM_SOAK_TIME") != "" {
		runs = []string{"sync", "sync-atomic", "async"}
	}
	if v := os.Getenv("IDEM_PGAF_RUNS"); v != "" {
		runs = strings.Split(v, ",")
	}
	set := soakSettingsFrom(t)
	if os.Getenv("IDEM_SOAK_TIME") == "" {
		// One round of the formation's faults, which take about 20 s
		// (a kill the longest): the load runs until they end.
		set.dur = 12 * time.Second
	}
	c := startPGAF(t, false)
	set.pgaf = c
	for _, run := range runs {
		t.Run(run, func(t *testing.T) {
			s := set
			switch run {
			case "sync", "sync-atomic":
				c.setMode(t, false)
				c.lag = pgafLag(t, 0)
				s.atomic = run == "sync-atomic"
			case "async":
				c.setMode(t, true)
				c.lag = pgafLag(t, time.Second)
			default:
				t.Fatalf("IDEM_PGAF_RUNS: no run %q (sync, sync-atomic, async)", run)
			}
			h, r := soak(t, s)
			logSwitchOutcomes(t, h)
			if c.async {
				lostCommits(t, h, r)
			}
		})
	}
}

// pgafLag is IDEM_PGAF_LAG (a duration) when set, def otherwise.
func pgafLag(t *testing.T, def time.Duration) time.Duration {
	v := os.Getenv("IDEM_PGAF_LAG")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("IDEM_PGAF_LAG=%q: want a duration", v)
	}
	return d
}

// logSwitchOutcomes logs how the calls that overlapped a fault of the
// formation ended: during a switch a call is answered (a replay, an
// execution whose completion the new primary took) or refused as
// unavailable (503), and the checker holds that none ran twice.
func logSwitchOutcomes(t *testing.T, h *history.History) {
	t.Helper()
	var spans [][2]int64
	for _, f := range h.Faults {
		if slices.Contains(pgafKinds, f.Kind) {
			spans = append(spans, [2]int64{f.Start, f.End})
		}
	}
	during := map[history.Outcome]int{}
	for _, c := range h.Calls {
		for _, s := range spans {
			if c.Invoke <= s[1] && c.Return >= s[0] {
				during[c.Outcome]++
				break
			}
		}
	}
	var parts []string
	for o, n := range during {
		parts = append(parts, fmt.Sprintf("%s %d", o, n))
	}
	slices.Sort(parts)
	t.Logf("calls during the formation's %d faults: %s", len(spans), strings.Join(parts, ", "))
}

// lostCommitKinds are the anomalies a commit the promoted standby never
// received can cause: a completed key back in progress or absent (a
// result told to a caller that SQL no longer holds), run again once its
// lease lapses or at once, a completion the Redis tier still holds that
// SQL lost (replayed from Redis, the SQL claim is left as it was), and
// the effect of the execution that ran again.
var lostCommitKinds = []history.Kind{
	history.DuplicateExecution, history.RerunAfterSuccess, history.LostResult,
	history.SplitRecord, history.LeftClaimed, history.ForeignResult, history.VanishedSuccess,
	history.DuplicateEffect, history.StrayEffect, history.StaleOwner,
}

// lostCommits reports what the asynchronous standby's lost commits cost:
// the keys the checker found broken, by kind, and how many of them ran
// twice, and which of the formation's faults their calls overlapped.
// Each anomaly must be one a lost commit explains: of a kind in
// lostCommitKinds, on a key a call of which overlapped a fault of the
// formation (the commit the standby lacked was made then). With an
// asynchronous standby each of them promotes a standby that may lack the
// last commits: a kill; a crash that the monitor answers with a failover
// before the node is back; and a switchover, whose old primary commits
// on until it is demoted, after the standby stopped replicating.
func lostCommits(t *testing.T, h *history.History, r *history.Report) {
	t.Helper()
	killed := map[string]map[history.FaultKind]bool{} // keys called during a fault of the formation
	for _, c := range h.Calls {
		for _, f := range h.Faults {
			if slices.Contains(pgafKinds, f.Kind) && c.Invoke <= f.End && (c.Return == 0 || c.Return >= f.Start) {
				if killed[c.Key] == nil {
					killed[c.Key] = map[history.FaultKind]bool{}
				}
				killed[c.Key][f.Kind] = true
			}
		}
	}
	keys := map[string]bool{}
	twice := map[string]bool{}
	for _, a := range r.Anomalies {
		keys[a.Key] = true
		switch a.Kind {
		case history.DuplicateExecution, history.RerunAfterSuccess, history.DuplicateEffect:
			twice[a.Key] = true
		}
		if around := len(killed[a.Key]) > 0; !slices.Contains(lostCommitKinds, a.Kind) || !around {
			t.Errorf("an anomaly no lost commit explains (kind %s, around a fault of the formation: %v): %s", a.Kind, around, describe(a))
		}
	}
	during := map[history.FaultKind]int{} // broken keys by the faults their calls overlapped
	for key := range keys {
		for k := range killed[key] {
			during[k]++
		}
	}
	var by []string
	for _, k := range history.Kinds {
		if n := r.Count(k); n > 0 {
			by = append(by, fmt.Sprintf("%s %d", k, n))
		}
	}
	t.Logf("asynchronous standby: %d switchovers, %d kills and %d crashes of the primary, %d keys called during them, %d keys broken by lost commits (%s; called during a switchover %d, a kill %d, a crash %d), %d of them run twice",
		r.Summary.Faults[PostgresSwitchover], r.Summary.Faults[PostgresPrimaryKill], r.Summary.Faults[PostgresCrash], len(killed), len(keys), strings.Join(by, ", "),
		during[PostgresSwitchover], during[PostgresPrimaryKill], during[PostgresCrash], len(twice))
}
