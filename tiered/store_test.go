package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

func TestNewRejectsNonsense(t *testing.T) {
	sql := newMem(t)
	for _, tc := range []struct {
		name string
		opts []tiered.Option
	}{
		{"no tier", nil},
		{"zero lease", []tiered.Option{tiered.WithSQL(sql), tiered.WithLease(0)}},
		{"zero retention", []tiered.Option{tiered.WithSQL(sql), tiered.WithRetention(0)}},
		{"negative retention", []tiered.Option{tiered.WithSQL(sql), tiered.WithRetention(-time.Hour)}},
		{"negative wait", []tiered.Option{tiered.WithSQL(sql), tiered.WithWait(-1)}},
		{"negative timeout", []tiered.Option{tiered.WithSQL(sql), tiered.WithTimeouts(-1, time.Second)}},
		{"cache without bytes", []tiered.Option{tiered.WithSQL(sql), tiered.WithLocalCache(10, 0, time.Minute)}},
		{"cache without ttl", []tiered.Option{tiered.WithSQL(sql), tiered.WithLocalCache(10, 1<<20, 0)}},
		{"negative cache ttl, cache off", []tiered.Option{tiered.WithSQL(sql), tiered.WithLocalCache(0, 0, -1)}},
		{"fallback without a cool-down", []tiered.Option{tiered.WithSQL(sql), tiered.WithRedisFallback(3, 0)}},
		{"negative fallback", []tiered.Option{tiered.WithSQL(sql), tiered.WithRedisFallback(-1, time.Second)}},
		{"nil sql", []tiered.Option{tiered.WithSQL(nil)}},
		{"nil redis", []tiered.Option{tiered.WithSQL(sql), tiered.WithRedis(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tiered.New(tc.opts...)
			if err == nil {
				_ = s.Close()
				t.Fatal("New accepted it")
			}
			if !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
}

// Every fault is in the one error New returns, named by its option.
func TestNewNamesEveryFault(t *testing.T) {
	_, err := tiered.New(tiered.WithLease(time.Millisecond), tiered.WithWait(-1), tiered.WithRedisFallback(1, 0))
	for _, name := range []string{"no tier", "WithLease", "WithWait", "WithRedisFallback"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	for _, mode := range []string{"sql", "redis", "redis+sql"} {
		t.Run(mode, func(t *testing.T) {
			sql, redis := newMem(t), newMem(t)
			var opts []tiered.Option
			if mode != "redis" {
				opts = append(opts, tiered.WithSQL(sql))
			}
			if mode != "sql" {
				opts = append(opts, tiered.WithRedis(redis))
			}
			// Two stores without local caches: the second replays from a tier.
			a := newStore(t, append(opts, tiered.WithLocalCache(0, 0, 0))...)
			b := newStore(t, append(opts, tiered.WithLocalCache(0, 0, 0))...)
			var c counter
			k := newKey(t)
			r1, err := a.Do(t.Context(), k, "fp", c.fn("charged"))
			if err != nil || r1.Replayed || string(r1.Value) != "charged" {
				t.Fatalf("first Do = %+v, %v", r1, err)
			}
			if mode == "redis+sql" {
				// The result reaches Redis off the first call's critical
				// path, once SQL holds it.
				eventually(t, func() error {
					if rec, err := redis.Get(t.Context(), k); err != nil || !rec.Completed() {
						return fmt.Errorf("redis holds %+v, %v", rec, err)
					}
					return nil
				})
			}
			r2, err := b.Do(t.Context(), k, "fp", c.fn("again"))
			if err != nil || !r2.Replayed || string(r2.Value) != "charged" {
				t.Fatalf("second Do = %+v, %v; want the first result replayed", r2, err)
			}
			if want := map[string]idem.Tier{"sql": idem.TierSQL, "redis": idem.TierRedis, "redis+sql": idem.TierRedis}[mode]; r2.Tier != want {
				t.Fatalf("replay came from %v, want %v", r2.Tier, want)
			}
			if n := c.runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times, want 1", n)
			}
		})
	}
}

func TestLocalCacheReplaysAndKeepsMismatch(t *testing.T) {
	sql := faultlayer.New(newMem(t))
	s := newStore(t, tiered.WithSQL(sql))
	var c counter
	k := newKey(t)
	if _, err := s.Do(t.Context(), k, "fp", c.fn("v")); err != nil {
		t.Fatal(err)
	}
	before := sql.Calls(faultlayer.Reserve)
	r, err := s.Do(t.Context(), k, "fp", c.fn("x"))
	if err != nil || !r.Replayed || r.Tier != idem.TierLocal || string(r.Value) != "v" {
		t.Fatalf("hot replay = %+v, %v; want a local replay", r, err)
	}
	if sql.Calls(faultlayer.Reserve) != before {
		t.Fatal("a hot replay reached SQL")
	}
	if _, err := s.Do(t.Context(), k, "other", c.fn("x")); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("cached key with another fingerprint: err = %v, want ErrMismatch", err)
	}
	if c.runs.Load() != 1 {
		t.Fatalf("fn ran %d times", c.runs.Load())
	}
}

func TestMismatch(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithRedis(newMem(t)), tiered.WithLocalCache(0, 0, 0))
	var c counter
	k := newKey(t)
	if _, err := s.Do(t.Context(), k, "amount=10", c.fn("ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(t.Context(), k, "amount=99", c.fn("evil")); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch", err)
	}
	if c.runs.Load() != 1 {
		t.Fatal("fn ran for a mismatching request")
	}
}

// TestBurstSharesOneExecution runs the burst with callers that can give up
// (the work runs on a goroutine of its own) and with callers that cannot
// (the leader runs it on its own goroutine).
func TestBurstSharesOneExecution(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"cancellable", func(t *testing.T) context.Context { return t.Context() }},
		{"background", func(*testing.T) context.Context { return context.Background() }},
	} {
		t.Run(c.name, func(t *testing.T) { testBurst(t, c.ctx(t)) })
	}
}

func testBurst(t *testing.T, ctx context.Context) {
	s := newStore(t, tiered.WithSQL(newMem(t)))
	k := newKey(t)
	var c counter
	release := make(chan struct{})
	fn := func(ctx context.Context) ([]byte, error) {
		c.runs.Add(1)
		<-release
		return []byte("one"), nil
	}
	const n = 50
	var wg sync.WaitGroup
	results := make([]tiered.Result, n)
	errs := make([]error, n)
	started := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			started <- struct{}{}
			results[i], errs[i] = s.Do(ctx, k, "fp", fn)
		})
	}
	for range n {
		<-started
	}
	time.Sleep(10 * time.Millisecond) // let the callers reach singleflight; correctness does not depend on it
	close(release)
	wg.Wait()
	replayed := 0
	for i := range n {
		if errs[i] != nil || string(results[i].Value) != "one" {
			t.Fatalf("caller %d: %+v, %v", i, results[i], errs[i])
		}
		if results[i].Replayed {
			replayed++
		}
	}
	if c.runs.Load() != 1 || replayed != n-1 {
		t.Fatalf("fn ran %d times, %d callers replayed; want 1 and %d", c.runs.Load(), replayed, n-1)
	}
}

func TestCallerCancelDoesNotCancelWork(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)))
	k := newKey(t)
	inWork := make(chan struct{})
	finish := make(chan struct{})
	var workErr error
	fn := func(ctx context.Context) ([]byte, error) {
		close(inWork)
		<-finish
		workErr = ctx.Err()
		return []byte("done"), nil
	}
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	leaderDone := make(chan error, 1)
	go func() {
		_, err := s.Do(leaderCtx, k, "fp", fn)
		leaderDone <- err
	}()
	<-inWork
	otherDone := make(chan tiered.Result, 1)
	go func() {
		r, err := s.Do(t.Context(), k, "fp", fn)
		if err != nil {
			t.Errorf("other caller: %v", err)
		}
		otherDone <- r
	}()
	cancelLeader()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v, want context.Canceled", err)
	}
	close(finish)
	r := <-otherDone
	if string(r.Value) != "done" || workErr != nil {
		t.Fatalf("other caller got %q; work context err %v: the work must survive one caller's cancel", r.Value, workErr)
	}
}

func TestErrorReleasesAndRetryRuns(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithRedis(newMem(t)))
	k := newKey(t)
	boom := errors.New("gateway timeout")
	r, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return []byte("503 body"), boom })
	if !errors.Is(err, boom) || string(r.Value) != "503 body" {
		t.Fatalf("failed work: %+v, %v", r, err)
	}
	var c counter
	r, err = s.Do(t.Context(), k, "fp", c.fn("ok"))
	if err != nil || r.Replayed || c.runs.Load() != 1 {
		t.Fatalf("retry after failure: %+v, %v, runs %d; want a fresh run", r, err, c.runs.Load())
	}
}

func TestPanicBecomesErrorAndReleases(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)))
	k := newKey(t)
	_, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { panic("card processor exploded") })
	var pe *tiered.PanicError
	if !errors.As(err, &pe) || pe.Value != "card processor exploded" || len(pe.Stack) == 0 {
		t.Fatalf("err = %v, want a *PanicError with value and stack", err)
	}
	var c counter
	if _, err := s.Do(t.Context(), k, "fp", c.fn("ok")); err != nil || c.runs.Load() != 1 {
		t.Fatalf("retry after panic: %v, runs %d", err, c.runs.Load())
	}
}

func TestOnce(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithLocalCache(0, 0, 0))
	k := newKey(t)
	runs := 0
	fn := func(context.Context) error { runs++; return nil }
	for i := range 5 {
		dup, err := s.Once(t.Context(), k, fn)
		if err != nil || dup != (i > 0) {
			t.Fatalf("delivery %d: duplicate=%v err=%v", i, dup, err)
		}
	}
	if runs != 1 {
		t.Fatalf("ran %d times", runs)
	}
	failing := newKey(t)
	if _, err := s.Once(t.Context(), failing, func(context.Context) error { return errors.New("db down") }); err == nil {
		t.Fatal("failed consumer reported success")
	}
	dup, err := s.Once(t.Context(), failing, fn)
	if err != nil || dup {
		t.Fatalf("redelivery after failure: duplicate=%v err=%v; want a fresh run", dup, err)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := tiered.New(tiered.WithSQL(newMem(t)))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_ = s.Close()
	if _, err := s.Do(t.Context(), newKey(t), "fp", (&counter{}).fn("x")); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

func TestZeroKeyRejected(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)))
	if _, err := s.Do(t.Context(), idem.Key{}, "fp", (&counter{}).fn("x")); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("err = %v", err)
	}
}

// Three stores, each with its own singleflight and cache, share one Redis
// and one SQL layer: every round of 20 concurrent identical calls runs fn
// exactly once and every caller gets the same bytes.
func TestThreeStoresExactlyOncePerRound(t *testing.T) {
	sql, redis := newMem(t), newMem(t)
	stores := make([]*tiered.Store, 3)
	for i := range stores {
		stores[i] = newStore(t, tiered.WithSQL(sql), tiered.WithRedis(redis))
	}
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	for round := range rounds {
		k := idem.NewKey("tenant", fmt.Sprintf("%s-%d", t.Name(), round))
		var c counter
		var wg sync.WaitGroup
		start := make(chan struct{})
		vals := make([][]byte, 20)
		for i := range 20 {
			wg.Go(func() {
				<-start
				r, err := stores[i%3].Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
					n := c.runs.Add(1)
					return fmt.Appendf(nil, "round %d run %d", round, n), nil
				})
				if err != nil {
					t.Errorf("round %d caller %d: %v", round, i, err)
				}
				vals[i] = r.Value
			})
		}
		close(start)
		wg.Wait()
		if n := c.runs.Load(); n != 1 {
			t.Fatalf("round %d: fn ran %d times", round, n)
		}
		for i := range vals {
			if !bytes.Equal(vals[i], vals[0]) {
				t.Fatalf("round %d: caller %d got %q, caller 0 got %q", round, i, vals[i], vals[0])
			}
		}
	}
}

type ctxKey struct{}

func TestWorkKeepsCallerValues(t *testing.T) {
	s := newStore(t, tiered.WithSQL(newMem(t)))
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "trace-1"))
	defer cancel()
	var got any
	_, err := s.Do(ctx, newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
		got = ctx.Value(ctxKey{})
		return nil, nil
	})
	if err != nil || got != "trace-1" {
		t.Fatalf("work saw value %v (err %v), want the caller's", got, err)
	}
}
