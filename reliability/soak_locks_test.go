package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// TestSoakAtomicLocks is the atomic mode's soak on MariaDB, where the
// server itself ends transactions under a handler: many payments over
// four Stores on one table — three in the atomic mode (two behind Redis),
// one in the standard mode (a rollout's mixed modes) — whose handlers
// debit two of a few accounts in random order (deadlock victims), hold
// their locks past the session's one-second lock wait now and then
// (lock-wait timeouts), and half the time shrug off the failed debit and
// write their charge on. Clients retry every error. At the end each key
// has at most one charge, a key whose record completed has exactly the
// charge of the execution whose answer the record holds, and every caller
// told a success got that answer. IDEM_SOAK_LOCKS_CALLS sizes it (800 by
// default, the short seed of make test); IDEM_SOAK_SEED seeds it.
func TestSoakAtomicLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for seconds of load")
	}
	calls := 800
	if v := os.Getenv("IDEM_SOAK_LOCKS_CALLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("IDEM_SOAK_LOCKS_CALLS=%q: want a positive number", v)
		}
		calls = n
	}
	seed := uint64(1)
	if v := os.Getenv("IDEM_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_SOAK_SEED=%q: %v", v, err)
		}
		seed = n
	}
	my := testenv.MySQL(t)
	cfg, err := mysqldriver.ParseDSN(my.DSN)
	if err != nil {
		t.Fatal(err)
	}
	// The user's own lock wait, on every connection of the Stores' pools:
	// the handlers' statements wait for locks that long, as they would
	// outside the atomic mode.
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	short := &testenv.SQL{Kind: my.Kind, DSN: cfg.FormatDSN(), Real: true}
	st := stacktest.On(t, "soak-locks", testenv.AnyRedis(t), short)
	admin := st.DB(t)
	rig := newLockRig(t, admin)
	stores := []*tiered.Store{
		rig.store(t, st, true, true), rig.store(t, st, true, true), rig.store(t, st, true, false),
		rig.store(t, st, false, false), // the standard mode, on the same table
	}
	keys := make([]idem.Key, 0, calls)
	var keysMu sync.Mutex
	pick := func(r *rand.Rand) idem.Key {
		keysMu.Lock()
		defer keysMu.Unlock()
		if len(keys) == 0 || r.IntN(3) == 0 {
			keys = append(keys, idem.NewKey("soak-locks", testenv.Name("pay")))
			return keys[len(keys)-1]
		}
		return keys[len(keys)-1-r.IntN(min(len(keys), 20))] // a recent one: a retry or a duplicate
	}
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		answers sync.Map // key -> answer a caller was told (first seen)
		mu      sync.Mutex
		split   []string // keys whose callers were told different answers
		counts  = map[string]int{}
	)
	count := func(what string) { mu.Lock(); counts[what]++; mu.Unlock() }
	began := time.Now()
	for w := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for next.Add(1) <= int64(calls) {
				key := pick(r)
				s := stores[r.IntN(len(stores))]
				for try := 0; ; try++ {
					count("calls")
					res, err := s.Do(t.Context(), key, "fp", rig.pay(r, key, s == stores[3], count))
					if err == nil {
						if prev, loaded := answers.LoadOrStore(key, string(res.Value)); loaded && prev != string(res.Value) {
							mu.Lock()
							split = append(split, fmt.Sprintf("%s: %q and %q", key, prev, res.Value))
							mu.Unlock()
						}
						count("answered")
						break
					}
					count("error: " + errClass(err))
					if try >= 30 {
						count("gave up")
						break
					}
					s = stores[r.IntN(len(stores))] // the client retries, through any instance
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	anomalies := rig.check(t, st, keys, &answers)
	anomalies = append(anomalies, split...)
	mu.Lock()
	var lines []string
	for k, v := range counts {
		lines = append(lines, fmt.Sprintf("%s %d", k, v))
	}
	mu.Unlock()
	t.Logf("soak locks: seed %d, %d payments, %d keys, %v (%.0f calls/s); %s; %d anomalies",
		seed, calls, len(keys), took.Round(time.Millisecond), float64(counts["calls"])/took.Seconds(), strings.Join(slices.Sorted(slices.Values(lines)), ", "), len(anomalies))
	for i, a := range anomalies {
		if i < 20 {
			t.Errorf("anomaly: %s", a)
		}
	}
	if len(anomalies) > 20 {
		t.Errorf("… and %d more anomalies", len(anomalies)-20)
	}
}

// lockRig is the soak's business tables: a few accounts that every
// payment debits two of, and the charges, several allowed per key so that
// a second one shows.
type lockRig struct {
	db       *bun.DB
	accounts string
	charges  string
}

const lockAccounts = 6

func newLockRig(t *testing.T, db *bun.DB) *lockRig {
	t.Helper()
	r := &lockRig{db: db, accounts: testenv.Name("soak_accounts"), charges: testenv.Name("soak_charges")}
	for _, ddl := range []string{
		"CREATE TABLE " + r.accounts + " (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL)",
		"CREATE TABLE " + r.charges + " (key_id VARCHAR(80) NOT NULL, exec_id VARCHAR(80) NOT NULL, INDEX (key_id))",
	} {
		if _, err := db.ExecContext(t.Context(), ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range []string{r.accounts, r.charges} {
			_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		}
	})
	for i := range lockAccounts {
		if _, err := db.ExecContext(t.Context(), "INSERT INTO "+r.accounts+" (id, balance) VALUES (?, 0)", i); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// store returns one of the soak's Stores: atomic or standard, behind
// Redis or not.
func (r *lockRig) store(t *testing.T, st *stacktest.Stack, atomicMode, withRedis bool) *tiered.Store {
	t.Helper()
	db := st.DB(t)
	db.SetMaxOpenConns(12)
	l, err := sqllayer.New(db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions))
	if err != nil {
		t.Fatal(err)
	}
	opts := []tiered.Option{tiered.WithSQL(l), tiered.WithAtomic(atomicMode), tiered.WithWait(3 * time.Second),
		tiered.WithTimeouts(time.Second, 3*time.Second), tiered.WithLease(5 * time.Second)}
	if withRedis {
		opts = append(opts, tiered.WithRedis(st.RedisLayer(t)))
	}
	s, err := tiered.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pay is one payment's handler: two debits in random order (the second
// failure shrugged off half the time), sometimes held past the lock wait
// of others, then the charge — in the atomic execution's transaction, or
// in a transaction of its own in the standard mode.
func (r *lockRig) pay(rnd *rand.Rand, key idem.Key, standard bool, count func(string)) tiered.Func {
	// Drawn here, on the worker's goroutine, which owns rnd.
	a, b := rnd.IntN(lockAccounts), rnd.IntN(lockAccounts-1)
	if b >= a {
		b++
	}
	// A standard-mode handler's transaction is its own: what it shrugs
	// off is the user's business, not the Store's.
	shrug, hold := rnd.IntN(2) == 0 && !standard, rnd.IntN(80) == 0
	exec := testenv.Name("exec")
	work := func(ctx context.Context, tx sqllayer.Tx) ([]byte, error) {
		if _, err := tx.ExecContext(ctx, "UPDATE "+r.accounts+" SET balance = balance - 1 WHERE id = ?", a); err != nil {
			count("handler: " + errClass(err))
			return nil, err
		}
		if hold {
			count("handler: held its lock past the lock wait")
			time.Sleep(1200 * time.Millisecond)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+r.accounts+" SET balance = balance - 1 WHERE id = ?", b); err != nil {
			count("handler: " + errClass(err))
			if !shrug {
				return nil, err
			}
			count("handler: shrugged off")
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+r.charges+" (key_id, exec_id) VALUES (?, ?)", key.String(), exec); err != nil {
			count("handler: charge " + errClass(err))
			return nil, err
		}
		return []byte(exec), nil
	}
	return func(ctx context.Context) ([]byte, error) {
		if standard {
			count("standard-mode executions")
			var val []byte
			err := r.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) (err error) {
				val, err = work(ctx, tx)
				return err
			})
			return val, err
		}
		tx, ok := sqllayer.TxFrom(ctx)
		if !ok {
			return nil, errors.New("no atomic transaction")
		}
		return work(ctx, tx)
	}
}

// check reads every key's charges and record back, and returns the
// anomalies: a second charge, a completed record without its execution's
// charge, an answer that is not the record's.
func (r *lockRig) check(t *testing.T, st *stacktest.Stack, keys []idem.Key, answers *sync.Map) []string {
	t.Helper()
	l, err := sqllayer.New(r.db, sqllayer.WithRecordsTable(st.Records), sqllayer.WithEventsTable(st.Events), sqllayer.WithVersionsTable(st.Versions))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[idem.Key]bool{}
	for _, key := range keys {
		if seen[key] {
			continue
		}
		seen[key] = true
		var execs []string
		rows, err := r.db.QueryContext(t.Context(), "SELECT exec_id FROM "+r.charges+" WHERE key_id = ?", key.String())
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var e string
			if err := rows.Scan(&e); err != nil {
				t.Fatal(err)
			}
			execs = append(execs, e)
		}
		_ = rows.Close()
		rec, err := l.Get(t.Context(), key)
		completed := err == nil && rec.Completed()
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			t.Fatal(err)
		}
		answer, told := answers.Load(key)
		switch {
		case len(execs) > 1:
			out = append(out, fmt.Sprintf("%s: %d charges %v, want at most one", key, len(execs), execs))
		case completed && (len(execs) != 1 || execs[0] != string(rec.Result)):
			out = append(out, fmt.Sprintf("%s: completed with %q, charges %v", key, rec.Result, execs))
		case !completed && len(execs) > 0:
			out = append(out, fmt.Sprintf("%s: charged %v, no completed record", key, execs))
		case told && (!completed || answer.(string) != string(rec.Result)):
			out = append(out, fmt.Sprintf("%s: a caller was told %q, the record holds %q", key, answer, rec.Result))
		}
	}
	return out
}

// errClass names an error by what the soak counts.
func errClass(err error) string {
	var my *mysqldriver.MySQLError
	switch {
	case errors.Is(err, idem.ErrInFlight):
		return "in flight"
	case errors.Is(err, idem.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, idem.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, tiered.ErrNotCommitted):
		return "not committed"
	case errors.As(err, &my):
		return fmt.Sprintf("mysql %d", my.Number)
	}
	return "other"
}
