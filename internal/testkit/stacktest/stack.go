package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// Stack is one Redis and one database shared by every Store of a test.
type Stack struct {
	// Name is "real" or "embedded".
	Name string
	// Redis is the shared Redis (a miniredis on the embedded stack).
	Redis *testenv.Redis
	// SQL is the shared database.
	SQL *testenv.SQL
	// Prefix is the Redis key prefix of this test.
	Prefix string
	// Records, Events and Versions are this test's table names.
	Records, Events, Versions string
}

// Each runs fn as a subtest on the real stack and on the embedded one.
func Each(t *testing.T, fn func(t *testing.T, s *Stack)) {
	t.Helper()
	t.Run("real", func(t *testing.T) { fn(t, Real(t)) })
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded(t)) })
}

// Real returns a stack on the real Redis and Postgres, falling back to the
// embedded ones when they are absent (a failure under
// IDEM_REQUIRE_SERVICES=1).
func Real(t testing.TB) *Stack {
	t.Helper()
	return build(t, "real", testenv.AnyRedis(t), testenv.AnySQL(t))
}

// Embedded returns a stack on miniredis and a SQLite file.
func Embedded(t testing.TB) *Stack {
	t.Helper()
	return build(t, "embedded", testenv.MiniRedis(t), testenv.SQLiteFile(t))
}

// On returns a stack on the given Redis and database.
func On(t testing.TB, name string, r *testenv.Redis, s *testenv.SQL) *Stack {
	t.Helper()
	return build(t, name, r, s)
}

func build(t testing.TB, name string, r *testenv.Redis, s *testenv.SQL) *Stack {
	t.Helper()
	st := &Stack{
		Name:     name,
		Redis:    r,
		SQL:      s,
		Prefix:   testenv.Prefix(),
		Records:  testenv.Name("idem_rec"),
		Events:   testenv.Name("idem_evt"),
		Versions: testenv.Name("idem_ver"),
	}
	db := s.Open(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range []string{st.Records, st.Events, st.Versions} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := must.Get(sqllayer.New(db, st.sqlOptions()...))(t).Init(ctx); err != nil {
		t.Fatalf("Init on %s: %v", s.Kind, err)
	}
	return st
}

func (st *Stack) sqlOptions() []sqllayer.Option {
	return []sqllayer.Option{
		sqllayer.WithRecordsTable(st.Records),
		sqllayer.WithEventsTable(st.Events),
		sqllayer.WithVersionsTable(st.Versions),
	}
}

// DB returns a pool of its own over the shared database.
func (st *Stack) DB(t testing.TB) *bun.DB {
	t.Helper()
	return st.SQL.Open(t) // capped at testenv.MaxTestConns on a real server
}

// SQLLayer returns a SQL layer over a pool of its own.
func (st *Stack) SQLLayer(t testing.TB, opts ...sqllayer.Option) *sqllayer.Layer {
	t.Helper()
	return must.Get(sqllayer.New(st.DB(t), append(st.sqlOptions(), opts...)...))(t)
}

// RedisLayer returns a Redis layer over a client of its own, closed when the
// test ends.
func (st *Stack) RedisLayer(t testing.TB, opts ...redislayer.Option) *redislayer.Layer {
	t.Helper()
	l := must.Get(redislayer.New(st.Redis.Client(t), append([]redislayer.Option{redislayer.WithPrefix(st.Prefix), redislayer.WithTimeout(2 * time.Second)}, opts...)...))(t)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Store returns a Store over a Redis layer and a SQL layer of its own
// (extra options after the defaults), closed when the test ends.
func (st *Stack) Store(t testing.TB, opts ...tiered.Option) *tiered.Store {
	t.Helper()
	base := []tiered.Option{tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(st.SQLLayer(t)), tiered.WithTimeouts(2*time.Second, 10*time.Second)}
	s, err := tiered.New(append(base, opts...)...)
	if err != nil {
		t.Fatalf("tiered.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
