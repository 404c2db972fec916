package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/tiered"
)

// burst runs 20 concurrent identical calls spread over stores and checks
// that fn ran exactly once and every caller got the same bytes. It returns
// how many callers failed (allowed only where the caller says so).
func burst(t *testing.T, stores []*tiered.Store, k idem.Key, round int) {
	t.Helper()
	var runs atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	vals := make([][]byte, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() {
			<-start
			r, err := stores[i%len(stores)].Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
				n := runs.Add(1)
				return fmt.Appendf(nil, "round %d run %d", round, n), nil
			})
			vals[i], errs[i] = r.Value, err
		})
	}
	close(start)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("round %d: fn ran %d times, want exactly 1", round, n)
	}
	for i := range vals {
		if errs[i] != nil {
			t.Fatalf("round %d caller %d: %v", round, i, errs[i])
		}
		if !bytes.Equal(vals[i], vals[0]) {
			t.Fatalf("round %d: caller %d got %q, caller 0 got %q", round, i, vals[i], vals[0])
		}
	}
}

// Three Stores (own singleflight and cache each) over one Redis and one
// database: 1,000 rounds of 20 concurrent identical calls.
func TestThreeStoresOnRealAndEmbeddedBackends(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		stores := []*tiered.Store{st.Store(t), st.Store(t), st.Store(t)}
		for round := range rounds {
			burst(t, stores, idem.NewKey("tenant", fmt.Sprintf("round-%d", round)), round)
		}
	})
}

func TestMismatchOnBackends(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		a, b := st.Store(t), st.Store(t, tiered.WithLocalCache(0, 0, 0))
		k := newKey(t)
		var c counter
		if _, err := a.Do(t.Context(), k, "amount=10", c.fn("ok")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Do(t.Context(), k, "amount=11", c.fn("evil")); !errors.Is(err, idem.ErrMismatch) {
			t.Fatalf("err = %v, want ErrMismatch", err)
		}
		if c.runs.Load() != 1 {
			t.Fatal("fn ran for a mismatching request")
		}
	})
}

// A duplicate of a completed key on a Store with a cold local cache is
// answered by Redis: SQL is not asked.
func TestColdDuplicateSkipsSQL(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		a := st.Store(t)
		sql := faultlayer.New(st.SQLLayer(t))
		redis := st.RedisLayer(t)
		b, err := tiered.New(tiered.WithRedis(redis), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		k := newKey(t)
		var c counter
		if _, err := a.Do(t.Context(), k, "fp", c.fn("paid")); err != nil {
			t.Fatal(err)
		}
		// The result reaches Redis off a's critical path, once SQL holds it.
		eventually(t, func() error {
			if rec, err := redis.Get(t.Context(), k); err != nil || !rec.Completed() {
				return fmt.Errorf("redis holds %+v, %v", rec, err)
			}
			return nil
		})
		r, err := b.Do(t.Context(), k, "fp", c.fn("again"))
		if err != nil || !r.Replayed || r.Tier != idem.TierRedis || string(r.Value) != "paid" {
			t.Fatalf("cold duplicate: %+v, %v; want a Redis replay", r, err)
		}
		if n := sql.Calls(faultlayer.Reserve) + sql.Calls(faultlayer.Get); n != 0 {
			t.Fatalf("SQL was asked %d times for a duplicate Redis could answer", n)
		}
	})
}

// A result found only in SQL (it was completed while Redis was away) is
// back-filled into Redis, so the next duplicate does not reach SQL.
func TestSQLReplayBackfillsRedis(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		sqlOnly, err := tiered.New(tiered.WithSQL(st.SQLLayer(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer sqlOnly.Close()
		k := newKey(t)
		var c counter
		if _, err := sqlOnly.Do(t.Context(), k, "fp", c.fn("decided in sql")); err != nil {
			t.Fatal(err)
		}
		b := st.Store(t, tiered.WithLocalCache(0, 0, 0))
		r, err := b.Do(t.Context(), k, "fp", c.fn("x"))
		if err != nil || r.Tier != idem.TierSQL || string(r.Value) != "decided in sql" {
			t.Fatalf("first duplicate: %+v, %v; want a SQL replay", r, err)
		}
		// The back-fill goes on after the answer, off the caller's time;
		// Close waits for it.
		_ = b.Close()
		sql := faultlayer.New(st.SQLLayer(t))
		cStore, err := tiered.New(tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		defer cStore.Close()
		r, err = cStore.Do(t.Context(), k, "fp", c.fn("x"))
		if err != nil || r.Tier != idem.TierRedis || sql.Calls(faultlayer.Reserve) != 0 {
			t.Fatalf("after back-fill: %+v, %v, SQL reserves %d; want a Redis replay", r, err, sql.Calls(faultlayer.Reserve))
		}
		if c.runs.Load() != 1 {
			t.Fatalf("fn ran %d times", c.runs.Load())
		}
	})
}

// Redis killed in the middle of the rounds, then restarted: every round
// still runs exactly once, answered by SQL while Redis is away.
func TestRedisKilledMidRun(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	r := &testenv.Redis{Options: srv.Options()}
	st := stacktest.On(t, "test-owned redis", r, testenv.AnySQL(t))
	mk := func() *tiered.Store {
		l := must.Get(redislayer.New(r.Client(t), redislayer.WithPrefix(st.Prefix), redislayer.WithTimeout(200*time.Millisecond)))(t)
		t.Cleanup(func() { _ = l.Close() })
		s, err := tiered.New(tiered.WithRedis(l), tiered.WithSQL(st.SQLLayer(t)),
			tiered.WithTimeouts(200*time.Millisecond, 10*time.Second), tiered.WithRedisFallback(3, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	stores := []*tiered.Store{mk(), mk(), mk()}
	for round := range 90 {
		switch round {
		case 30:
			srv.Kill()
		case 60:
			srv.Restart()
		}
		burst(t, stores, idem.NewKey("tenant", fmt.Sprintf("kill-%d", round)), round)
	}
}

// The same with miniredis closed mid-run (the embedded path).
func TestMiniredisClosedMidRun(t *testing.T) {
	st := stacktest.Embedded(t)
	stores := []*tiered.Store{
		st.Store(t, tiered.WithTimeouts(200*time.Millisecond, 10*time.Second)),
		st.Store(t, tiered.WithTimeouts(200*time.Millisecond, 10*time.Second)),
		st.Store(t, tiered.WithTimeouts(200*time.Millisecond, 10*time.Second)),
	}
	for round := range 60 {
		if round == 30 {
			st.Redis.Mini.Close()
		}
		burst(t, stores, idem.NewKey("tenant", fmt.Sprintf("mini-%d", round)), round)
	}
}

// With SQL unreachable (every connection refused and reset at a proxy in
// front of Postgres), Do fails closed: ErrUnavailable and zero executions.
func TestSQLUnreachableFailsClosed(t *testing.T) {
	viaProxy, proxy := testenv.PostgresViaProxy(t)
	st := stacktest.On(t, "postgres via proxy", testenv.AnyRedis(t), viaProxy)
	s := st.Store(t, tiered.WithTimeouts(2*time.Second, time.Second))
	var c counter
	if _, err := s.Do(t.Context(), newKey(t), "fp", c.fn("ok")); err != nil {
		t.Fatalf("with SQL reachable: %v", err)
	}
	proxy.RefuseNew(true)
	proxy.ResetAll()
	for i := range 20 {
		_, err := s.Do(t.Context(), newKey(t), "fp", c.fn("must not run"))
		if !errors.Is(err, idem.ErrUnavailable) {
			t.Fatalf("call %d with SQL down: %v, want ErrUnavailable", i, err)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times while SQL was down, want 0 more", n-1)
	}
	proxy.RefuseNew(false)
	if _, err := s.Do(t.Context(), newKey(t), "fp", c.fn("ok")); err != nil {
		t.Fatalf("after SQL returns: %v", err)
	}
}
