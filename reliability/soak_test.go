//go:build soak

package reliability_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// soakTime is how long the soak runs: IDEM_SOAK_TIME, 60 s by default.
func soakTime(t *testing.T) time.Duration {
	v := os.Getenv("IDEM_SOAK_TIME")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("IDEM_SOAK_TIME=%q: want a positive duration", v)
	}
	return d
}

// soakNode is a node the soak closes itself, so that it can count what is
// left afterwards.
type soakNode struct {
	store *tiered.Store
	close func()
}

func newSoakNode(t *testing.T, b *backend, app string) *soakNode {
	t.Helper()
	db := testenv.WithApplicationName(t, b.st.SQL, app).Open(t)
	db.SetMaxOpenConns(4)
	sl := sqllayer.New(db, sqllayer.WithRecordsTable(b.st.Records), sqllayer.WithEventsTable(b.st.Events), sqllayer.WithVersionsTable(b.st.Versions))
	o := b.ropts
	rc := redis.NewClient(&o)
	rl := redislayer.New(rc, redislayer.WithPrefix(b.st.Prefix), redislayer.WithTimeout(redisTimeout))
	s, err := tiered.New(tiered.WithSQL(sl), tiered.WithRedis(rl),
		tiered.WithTimeouts(redisTimeout, sqlTimeout), tiered.WithLease(3*time.Second),
		tiered.WithWait(5*time.Second), tiered.WithRedisFallback(3, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	n := &soakNode{store: s}
	n.close = func() {
		once.Do(func() {
			_ = s.Close()
			_ = rl.Close()
			_ = rc.Close()
			_ = db.Close()
		})
	}
	t.Cleanup(n.close)
	return n
}

// soakKey is one key of the soak and everything that happened to it.
type soakKey struct {
	key  idem.Key
	fp   string
	once bool

	mu        sync.Mutex // guards the fields below
	successes int        // runs of fn that returned success
	value     []byte     // what the successful run returned
	answers   int        // successful calls that got a value
	bad       []string   // answers that were not the successful run's bytes
}

// soakStats counts what the callers saw.
type soakStats struct {
	calls, runs, replays, mismatches, fnErrors atomic.Int64
	refused                                    atomic.Int64 // ErrMismatch for the key's own request
	inFlight, unavailable, leaseLost, other    atomic.Int64
	onceDuplicates                             atomic.Int64
	mu                                         sync.Mutex
	others                                     map[string]int
}

func (s *soakStats) classify(err error) {
	switch {
	case errors.Is(err, idem.ErrMismatch):
		s.mismatches.Add(1)
	case errors.Is(err, idem.ErrInFlight):
		s.inFlight.Add(1)
	case errors.Is(err, idem.ErrUnavailable):
		s.unavailable.Add(1)
	case errors.Is(err, idem.ErrLeaseLost):
		s.leaseLost.Add(1)
	case errors.Is(err, errBoom):
		s.fnErrors.Add(1)
	default:
		s.other.Add(1)
		s.mu.Lock()
		s.others[err.Error()]++
		s.mu.Unlock()
	}
}

// pgConns counts the Postgres backends whose application name starts with
// prefix.
func pgConns(ctx context.Context, b *backend, prefix string) (int, error) {
	var n int
	err := b.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ?", prefix+"%").Scan(&n)
	return n, err
}

// TestSoak runs mixed load — new keys, duplicates on every instance at
// once, mismatches, Once consumers, failing functions — over three Stores
// for IDEM_SOAK_TIME, restarting the test-owned redis-server (empty) at a
// third of the time and terminating every Postgres backend of the Stores at
// half of it. Then: no key's function succeeded twice, every successful run
// is completed in SQL with its bytes, every caller that succeeded got those
// bytes, no claim is left, no Redis key lives forever, and goroutines and
// Postgres connections are back to their baseline once the Stores close.
func TestSoak(t *testing.T) {
	dur := soakTime(t)
	b := ownedBackend(t)
	ctx := context.Background()
	appPrefix := testenv.Name("idemsoak")
	baseGoroutines := runtime.NumGoroutine()
	basePG, err := pgConns(ctx, b, appPrefix)
	if err != nil {
		t.Fatal(err)
	}

	nodes := make([]*soakNode, 3)
	for i := range nodes {
		nodes[i] = newSoakNode(t, b, fmt.Sprintf("%s_%d", appPrefix, i))
	}

	var (
		stats  = soakStats{others: map[string]int{}}
		keysMu sync.Mutex
		keys   []*soakKey // every key, in order of creation
		seq    atomic.Int64
	)
	newSoakKey := func(once bool) *soakKey {
		k := &soakKey{key: idem.NewKey("soak", fmt.Sprintf("k%d", seq.Add(1))), fp: "fp-A", once: once}
		keysMu.Lock()
		keys = append(keys, k)
		keysMu.Unlock()
		return k
	}
	// recent picks one of the last 32 keys, so that duplicates land while
	// the first call still runs as well as after it.
	recent := func(r *rand.Rand, once bool) *soakKey {
		keysMu.Lock()
		defer keysMu.Unlock()
		for range 8 {
			if len(keys) == 0 {
				break
			}
			k := keys[len(keys)-1-r.IntN(min(32, len(keys)))]
			if k.once == once {
				return k
			}
		}
		return nil
	}

	fnFor := func(k *soakKey, fail bool) func(context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			stats.runs.Add(1)
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // work takes a while, so duplicates overlap it
			if fail {
				return nil, errBoom
			}
			v := []byte(fmt.Sprintf("%s/%d", k.key.String(), stats.runs.Load()))
			if k.once {
				v = []byte{}
			}
			k.mu.Lock()
			k.successes++
			if k.successes == 1 {
				k.value = v
			}
			k.mu.Unlock()
			return v, nil
		}
	}
	call := func(r *rand.Rand) {
		stats.calls.Add(1)
		n := nodes[r.IntN(len(nodes))].store
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		p := r.IntN(100)
		fail := r.IntN(100) < 7
		var k *soakKey
		switch {
		case p < 25: // a new operation
			k = newSoakKey(false)
		case p < 65: // a duplicate (often while the first still runs)
			k = recent(r, false)
		case p < 75: // a mismatch: a completed key reused for another request
			if k = recent(r, false); k != nil {
				k.mu.Lock()
				done := k.successes > 0
				k.mu.Unlock()
				if done {
					_, err := n.Do(c, k.key, "fp-B", func(context.Context) ([]byte, error) {
						stats.runs.Add(1)
						return nil, errors.New("a mismatching request ran")
					})
					if err == nil || !errors.Is(err, idem.ErrMismatch) {
						t.Errorf("mismatching request for a completed key: %v, want ErrMismatch", err)
					}
					stats.classify(err)
					return
				}
				k = nil
			}
		default: // a queue consumer: new messages and redeliveries
			if p < 85 {
				k = newSoakKey(true)
			} else if k = recent(r, true); k == nil {
				k = newSoakKey(true)
			}
			fn := fnFor(k, fail)
			dup, err := n.Once(c, k.key, func(ctx context.Context) error { _, err := fn(ctx); return err })
			if err != nil {
				stats.classify(err)
				return
			}
			if dup {
				stats.onceDuplicates.Add(1)
			}
			k.mu.Lock()
			k.answers++
			if k.successes == 0 {
				k.bad = append(k.bad, "Once succeeded with no successful run")
			}
			k.mu.Unlock()
			return
		}
		if k == nil {
			k = newSoakKey(false)
		}
		res, err := n.Do(c, k.key, k.fp, fnFor(k, fail))
		if errors.Is(err, idem.ErrMismatch) {
			stats.refused.Add(1) // this request is the key's own: never a mismatch
			t.Errorf("key %v: its own request got %v", k.key, err)
		}
		if err != nil {
			stats.classify(err)
			return
		}
		if res.Replayed {
			stats.replays.Add(1)
		}
		k.mu.Lock()
		k.answers++
		if string(res.Value) != string(k.value) {
			k.bad = append(k.bad, fmt.Sprintf("got %q, the run returned %q", res.Value, k.value))
		}
		k.mu.Unlock()
	}

	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				call(r)
			}
		})
	}
	var maxPG atomic.Int64
	faults := make(chan string, 4)
	wg.Go(func() { // the fault schedule
		at := func(d time.Duration) bool {
			t := time.NewTimer(time.Until(start.Add(d)))
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-stop:
				return false
			}
		}
		if !at(dur / 3) {
			return
		}
		b.srv.Restart()
		faults <- fmt.Sprintf("%v: redis-server restarted empty", time.Since(start).Round(time.Millisecond))
		if !at(dur / 2) {
			return
		}
		n := 0
		for i := range nodes {
			n += testenv.TerminatePostgres(t, b.admin, fmt.Sprintf("%s_%d", appPrefix, i))
		}
		faults <- fmt.Sprintf("%v: %d Postgres backends terminated", time.Since(start).Round(time.Millisecond), n)
	})
	wg.Go(func() { // the connection high-water mark
		for {
			if n, err := pgConns(ctx, b, appPrefix); err == nil && int64(n) > maxPG.Load() {
				maxPG.Store(int64(n))
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	time.Sleep(dur) // the load runs on the workers meanwhile
	close(stop)
	wg.Wait()
	close(faults)
	for f := range faults {
		t.Log("fault: " + f)
	}

	// Zero double runs; every success completed in SQL with its bytes.
	rows, err := b.admin.QueryContext(ctx, "SELECT key_digest, state, result FROM "+b.st.Records)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]sqlRow{}
	for rows.Next() {
		var d, res []byte
		var state int64
		if err := rows.Scan(&d, &state, &res); err != nil {
			t.Fatal(err)
		}
		stored[hex.EncodeToString(d)] = sqlRow{found: true, state: idem.State(state), result: res}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	var doubles, lost, wrongAnswers, succeededKeys, answers int
	for _, k := range keys {
		if k.successes > 1 {
			doubles++
			t.Errorf("key %v: fn succeeded %d times", k.key, k.successes)
		}
		for _, bad := range k.bad {
			wrongAnswers++
			t.Errorf("key %v: %s", k.key, bad)
		}
		answers += k.answers
		if k.successes == 0 {
			continue
		}
		succeededKeys++
		row := stored[k.key.Hex()]
		if row.state != idem.StateCompleted || string(row.result) != string(k.value) {
			lost++
			t.Errorf("key %v: fn returned %q but SQL holds %+v", k.key, k.value, row)
		}
	}
	inProgress := b.sqlCount(t, "state IN (1, 3)")
	immortal := b.keysWithoutTTL(t)

	// Back to the baseline once the Stores close.
	for _, n := range nodes {
		n.close()
	}
	var goroutines, conns int
	deadline := time.Now().Add(15 * time.Second)
	for {
		goroutines = runtime.NumGoroutine()
		conns, _ = pgConns(ctx, b, appPrefix)
		if (goroutines <= baseGoroutines && conns <= basePG) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // goroutines and backends exit asynchronously
	}

	others := []string{}
	for msg, n := range stats.others {
		others = append(others, fmt.Sprintf("%dx %s", n, msg))
	}
	sort.Strings(others)
	t.Logf(`soak over %v (3 stores, 12 workers):
  calls          %d
  executions     %d  (keys whose fn succeeded: %d of %d)
  successes      %d  (replays %d, Once duplicates %d)
  mismatches     %d  (own requests refused as mismatches: %d)
  errors         in_flight=%d unavailable=%d lease_lost=%d fn_error=%d other=%d %s
  double runs    %d
  lost results   %d
  wrong answers  %d
  claims left    %d in progress; Redis keys without TTL: %d
  goroutines     baseline %d, after close %d
  pg connections baseline %d, high-water %d, after close %d`,
		dur, stats.calls.Load(), stats.runs.Load(), succeededKeys, len(keys),
		answers, stats.replays.Load(), stats.onceDuplicates.Load(), stats.mismatches.Load(), stats.refused.Load(),
		stats.inFlight.Load(), stats.unavailable.Load(), stats.leaseLost.Load(), stats.fnErrors.Load(), stats.other.Load(), strings.Join(others, "; "),
		doubles, lost, wrongAnswers, inProgress, len(immortal), baseGoroutines, goroutines, basePG, maxPG.Load(), conns)
	if doubles > 0 || lost > 0 || wrongAnswers > 0 {
		t.Fatalf("%d double runs, %d lost results, %d wrong answers", doubles, lost, wrongAnswers)
	}
	if inProgress > 0 || len(immortal) > 0 {
		t.Fatalf("%d claims left in progress, Redis keys without TTL %v", inProgress, immortal)
	}
	if goroutines > baseGoroutines || conns > basePG {
		buf := make([]byte, 1<<20)
		t.Fatalf("not back to baseline: goroutines %d > %d or connections %d > %d\n%s", goroutines, baseGoroutines, conns, basePG, buf[:runtime.Stack(buf, true)])
	}
}
