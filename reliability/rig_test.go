package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// backend is the Redis and the database one scenario runs on, with the
// handles that break them and the clients that read what they hold.
type backend struct {
	name   string
	st     *stacktest.Stack
	srv    *testenv.RedisServer // a test-owned redis-server, or nil
	mini   *miniredis.Miniredis // the embedded Redis, or nil
	pg     bool                 // the database is Postgres
	admin  *bun.DB              // reads and locks rows; not a node's pool
	rdb    *redis.Client        // reads Redis directly; not a node's client
	reader *redislayer.Layer    // reads records through the layer, on rdb
	ropts  redis.Options        // client options of the backend's Redis
}

// ownedBackend is a test-owned redis-server, which the scenario may kill,
// pause and flush, and the real Postgres. Both are required under
// IDEM_REQUIRE_SERVICES=1 and skipped otherwise when absent.
func ownedBackend(t *testing.T) *backend {
	t.Helper()
	pg := testenv.Postgres(t)
	srv := testenv.StartRedisServer(t)
	b := newBackend(t, "real", &testenv.Redis{Options: srv.Options()}, pg)
	b.srv = srv
	return b
}

// sharedBackend is the shared real Redis (under a prefix of this test's own)
// and the real Postgres, for scenarios that break nothing in Redis.
func sharedBackend(t *testing.T) *backend {
	t.Helper()
	pg := testenv.Postgres(t)
	return newBackend(t, "real", testenv.RealRedis(t), pg)
}

// embeddedBackend is miniredis, whose TTLs run with the wall clock as a real
// server's do, and a SQLite file.
func embeddedBackend(t *testing.T) *backend {
	t.Helper()
	r := testenv.MiniRedis(t)
	r.Mini.ClockTTL(true)
	b := newBackend(t, "embedded", r, testenv.SQLiteFile(t))
	b.mini = r.Mini
	return b
}

func newBackend(t *testing.T, name string, r *testenv.Redis, s *testenv.SQL) *backend {
	t.Helper()
	b := &backend{name: name, st: stacktest.On(t, name, r, s), pg: s.Kind == "postgres"}
	b.ropts = *r.Options
	b.ropts.ContextTimeoutEnabled = true
	b.admin = b.st.DB(t)
	b.rdb = b.client(t, "")
	b.reader = must.Get(redislayer.New(b.rdb, redislayer.WithPrefix(b.st.Prefix), redislayer.WithTimeout(5*time.Second)))(t)
	t.Cleanup(func() { _ = b.reader.Close() })
	return b
}

// eachBackend runs fn on the real services (through real) and on the
// embedded pair.
func eachBackend(t *testing.T, real func(*testing.T) *backend, fn func(t *testing.T, b *backend)) {
	t.Helper()
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		fn(t, real(t))
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		fn(t, embeddedBackend(t))
	})
}

// client returns a Redis client of its own to addr ("" for the backend's
// Redis), closed when the test ends.
func (b *backend) client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	o := b.ropts
	if addr != "" {
		o.Addr = addr
	}
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// killRedis ends the Redis server: SIGKILL for a test-owned server, Close
// for miniredis.
func (b *backend) killRedis(t *testing.T) {
	t.Helper()
	switch {
	case b.srv != nil:
		b.srv.Kill()
	case b.mini != nil:
		b.mini.Close()
	default:
		t.Fatal("the shared Redis is not this test's to kill")
	}
}

// restartRedis starts the killed server again, empty, on the same port.
func (b *backend) restartRedis(t *testing.T) {
	t.Helper()
	switch {
	case b.srv != nil:
		b.srv.Restart()
	case b.mini != nil:
		b.mini.FlushAll()
		if err := b.mini.Restart(); err != nil {
			t.Fatalf("miniredis restart: %v", err)
		}
	default:
		t.Fatal("the shared Redis is not this test's to restart")
	}
}

// flushRedis empties the server, as FLUSHALL by an operator or a failover
// to an empty replica would.
func (b *backend) flushRedis(t *testing.T) {
	t.Helper()
	switch {
	case b.srv != nil:
		if err := b.rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL on the test-owned server: %v", err)
		}
	case b.mini != nil:
		b.mini.FlushAll()
	default:
		t.Fatal("the shared Redis is not this test's to flush")
	}
}

// redisName returns the Redis key of k's record under the backend's prefix.
func (b *backend) redisName(k idem.Key) string { return b.st.Prefix + "{" + k.Hex() + "}" }

// redisRecord is a record as Redis holds it.
type redisRecord struct {
	found  bool
	state  idem.State
	fp     string
	result []byte
}

// redisRecord reads k's record from Redis through a layer of its own (the
// value's layout is the layer's business).
func (b *backend) redisRecord(t *testing.T, k idem.Key) redisRecord {
	t.Helper()
	rec, err := b.reader.Get(context.Background(), k)
	if errors.Is(err, idem.ErrNotFound) {
		return redisRecord{}
	}
	if err != nil {
		t.Fatalf("redis record of the key: %v", err)
	}
	return redisRecord{found: true, state: rec.State, fp: rec.Fingerprint, result: rec.Result}
}

// redisCompleted reads k's record from Redis once it is completed, or after
// 10 s, whatever it is then. A Store answers its caller once SQL holds the
// result; Redis learns it just after, off the caller's time.
func (b *backend) redisCompleted(t *testing.T, k idem.Key) redisRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := b.redisRecord(t, k)
		if rec.state == idem.StateCompleted || time.Now().After(deadline) {
			return rec
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// keysWithoutTTL returns the keys under the backend's prefix that would
// live forever (PTTL -1).
func (b *backend) keysWithoutTTL(t testing.TB) []string {
	t.Helper()
	keys, err := b.immortalKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// immortalKeys is keysWithoutTTL for callers that are not a test.
func (b *backend) immortalKeys(ctx context.Context) ([]string, error) {
	var out []string
	iter := b.rdb.Scan(ctx, 0, b.st.Prefix+"*", 200).Iterator()
	for iter.Next(ctx) {
		ttl, err := b.rdb.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			return nil, fmt.Errorf("PTTL %s: %w", iter.Val(), err)
		}
		if ttl == -1 { // -2: gone since the scan
			out = append(out, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("SCAN %s*: %w", b.st.Prefix, err)
	}
	return out, nil
}

// redisKeys counts the keys under the backend's prefix.
func (b *backend) redisKeys(t *testing.T) int {
	t.Helper()
	keys, err := b.rdb.Keys(context.Background(), b.st.Prefix+"*").Result()
	if err != nil {
		t.Fatalf("KEYS %s*: %v", b.st.Prefix, err)
	}
	return len(keys)
}

// dbNow is the database clock, as the layer's statements read it.
func (b *backend) dbNow() string {
	if b.pg {
		return "clock_timestamp()"
	}
	return "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)"
}

// sqlRow is a record as the database holds it, with the database's verdict
// on its lease.
type sqlRow struct {
	found     bool
	state     idem.State
	fp        string
	result    []byte
	leaseLive bool
}

// sqlRow reads k's row directly.
func (b *backend) sqlRow(t testing.TB, k idem.Key) sqlRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := k.Digest()
	rows, err := b.admin.QueryContext(ctx, "SELECT state, fingerprint, result, COALESCE(lease_until > "+b.dbNow()+", false) FROM "+
		b.st.Records+" WHERE key_digest = ?", d[:])
	if err != nil {
		t.Fatalf("read row: %v", err)
	}
	defer rows.Close()
	var r sqlRow
	if rows.Next() {
		var state int64
		var fp []byte
		if err := rows.Scan(&state, &fp, &r.result, &r.leaseLive); err != nil {
			t.Fatalf("scan row: %v", err)
		}
		r.found, r.state, r.fp = true, idem.State(state), string(fp)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read row: %v", err)
	}
	return r
}

// sqlCount counts the rows of the records table that match where.
func (b *backend) sqlCount(t testing.TB, where string, args ...any) int {
	t.Helper()
	n, err := b.countRows(context.Background(), where, args...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// countRows is sqlCount for callers that are not a test.
func (b *backend) countRows(ctx context.Context, where string, args ...any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	q := "SELECT count(*) FROM " + b.st.Records
	if where != "" {
		q += " WHERE " + where
	}
	if err := b.admin.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// lapsedWhere selects in-progress rows whose lease has lapsed by the
// database's clock: claims no one owns any more.
func (b *backend) lapsedWhere() string { return "state IN (1, 3) AND lease_until <= " + b.dbNow() }

// requireCompleted fails unless k's row is completed with want.
func (b *backend) requireCompleted(t *testing.T, k idem.Key, want string) {
	t.Helper()
	r := b.sqlRow(t, k)
	if !r.found || r.state != idem.StateCompleted || string(r.result) != want {
		t.Fatalf("SQL row of the key: found=%v state=%v result=%q; want completed with %q", r.found, r.state, r.result, want)
	}
}

// node is one service instance: a Store over a Redis layer and a SQL layer
// of its own, each behind a fault layer, with a recorder of its events.
type node struct {
	*tiered.Store
	redis  *faultlayer.WaitingLayer // nil for a node without Redis
	sql    *faultlayer.Layer
	events *recorder
}

type nodeConfig struct {
	store     []tiered.Option
	app       string // Postgres application_name of the node's pool
	redisAddr string // a fault proxy in front of Redis, or ""
	noRedis   bool
	sqlVia    *testenv.SQL // the database through a fault proxy, or nil
	maxConns  int          // the node's pool size on a server; 0 for 4
}

type nodeOption func(*nodeConfig)

// withStore adds Store options after the node's defaults.
func withStore(opts ...tiered.Option) nodeOption {
	return func(c *nodeConfig) { c.store = append(c.store, opts...) }
}

// withApp marks the node's Postgres connections with application_name app.
func withApp(app string) nodeOption { return func(c *nodeConfig) { c.app = app } }

// withRedisAddr connects the node's Redis client to addr (a fault proxy).
func withRedisAddr(addr string) nodeOption { return func(c *nodeConfig) { c.redisAddr = addr } }

// withSQLVia connects the node's pool through s (a fault proxy in front of
// the backend's database).
func withSQLVia(s *testenv.SQL) nodeOption { return func(c *nodeConfig) { c.sqlVia = s } }

// withMaxConns sets the node's pool size on a database server.
func withMaxConns(n int) nodeOption { return func(c *nodeConfig) { c.maxConns = n } }

// withoutRedis builds a SQL-only node.
func withoutRedis() nodeOption { return func(c *nodeConfig) { c.noRedis = true } }

// Timeouts of a node unless the scenario says otherwise: Redis answers a
// local call in well under a millisecond, so 300 ms only trips on a fault
// (or a machine far busier than a test run makes it).
const (
	redisTimeout = 300 * time.Millisecond
	sqlTimeout   = 5 * time.Second
)

// node builds a node, closed when the test ends.
func (b *backend) node(t *testing.T, opts ...nodeOption) *node {
	t.Helper()
	var c nodeConfig
	for _, o := range opts {
		o(&c)
	}
	n := &node{events: newRecorder()}
	sqlDB := b.st.SQL
	if c.sqlVia != nil {
		sqlDB = c.sqlVia
	}
	if c.app != "" {
		sqlDB = testenv.WithApplicationName(t, sqlDB, c.app)
	}
	db := sqlDB.Open(t)
	if b.pg {
		db.SetMaxOpenConns(4) // the server is shared with other packages' tests
		if c.maxConns > 0 {
			db.SetMaxOpenConns(c.maxConns)
		}
	}
	n.sql = faultlayer.New(must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(b.st.Records),
		sqllayer.WithEventsTable(b.st.Events), sqllayer.WithVersionsTable(b.st.Versions)))(t))
	storeOpts := []tiered.Option{
		tiered.WithSQL(n.sql),
		tiered.WithTimeouts(redisTimeout, sqlTimeout),
		tiered.WithObserver(n.events),
	}
	if !c.noRedis {
		rl := must.Get(redislayer.New(b.client(t, c.redisAddr), redislayer.WithPrefix(b.st.Prefix), redislayer.WithTimeout(redisTimeout)))(t)
		t.Cleanup(func() { _ = rl.Close() })
		n.redis = faultlayer.New(rl).Waiting()
		storeOpts = append(storeOpts, tiered.WithRedis(n.redis))
	}
	s, err := tiered.New(append(storeOpts, c.store...)...)
	if err != nil {
		t.Fatalf("tiered.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	n.Store = s
	return n
}

// newKey returns a key no other test uses.
func newKey(t testing.TB) idem.Key { return idem.NewKey(t.Name(), testenv.Name("k")) }

// answer is what one call of Do returned.
type answer struct {
	res tiered.Result
	err error
}

// goDo calls n.Do in a goroutine of its own; the answer arrives on the
// returned channel, which has room for it, so the goroutine always ends.
func goDo(ctx context.Context, n *node, k idem.Key, fp string, fn tiered.Func) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := n.Do(ctx, k, fp, fn)
		ch <- answer{res, err}
	}()
	return ch
}

// receive waits for an answer, failing the test if none comes within a
// generous bound (a hang is a bug; the bound only keeps a hang from eating
// the whole test timeout).
func receive(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("a call did not return within 30s")
		return answer{}
	}
}

// waitFor polls cond until it holds, failing the test after 20s. It waits
// for something the test cannot be told of by a channel (a server's state).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// acceptable reports whether err is one of the answers a caller may get
// when a fault hits the stores: the work did not run for it, and it may
// retry.
func acceptable(err error) bool {
	return errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrInFlight)
}

// describe formats an answer for a failure message.
func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("error %v", a.err)
	}
	return fmt.Sprintf("%q (replayed=%v, tier=%v)", a.res.Value, a.res.Replayed, a.res.Tier)
}
