package tiered_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

func TestRedisDownSQLDecidesAndFallbackSwitches(t *testing.T) {
	// Long enough that the calls made while Redis is switched off all fall
	// inside it on a loaded machine.
	const cooldown = time.Second
	sql := faultlayer.New(newMem(t))
	redis := faultlayer.New(newMem(t))
	rec := newRecorder()
	s := newStore(t, tiered.WithSQL(sql), tiered.WithRedis(redis), tiered.WithObserver(rec),
		tiered.WithLocalCache(0, 0, 0), tiered.WithRedisFallback(2, cooldown))
	redis.Down()
	var c counter
	k := newKey(t)
	for i := range 4 {
		r, err := s.Do(t.Context(), k, "fp", c.fn("ok"))
		if err != nil || string(r.Value) != "ok" || r.Replayed != (i > 0) {
			t.Fatalf("call %d with Redis down: %+v, %v", i, r, err)
		}
	}
	if c.runs.Load() != 1 {
		t.Fatalf("fn ran %d times with Redis down", c.runs.Load())
	}
	if rec.count("fallback_on") != 1 {
		t.Fatalf("fallback_on events: %d, want 1", rec.count("fallback_on"))
	}
	// While switched off, Redis is not even tried.
	tried := redis.Calls(faultlayer.Reserve)
	if _, err := s.Do(t.Context(), k, "fp", c.fn("x")); err != nil {
		t.Fatal(err)
	}
	if redis.Calls(faultlayer.Reserve) != tried {
		t.Fatal("a switched-off Redis was called inside its cool-down")
	}
	// After the cool-down one call probes it; it answers and is used again.
	redis.Up()
	time.Sleep(cooldown + cooldown/5)
	k2 := newKey(t)
	if _, err := s.Do(t.Context(), k2, "fp", c.fn("y")); err != nil {
		t.Fatal(err)
	}
	if rec.count("fallback_off") != 1 || redis.Calls(faultlayer.Reserve) == tried {
		t.Fatalf("fallback_off events %d, Redis reserves %d→%d: want Redis probed and back", rec.count("fallback_off"), tried, redis.Calls(faultlayer.Reserve))
	}
}

func TestSQLDownFailsClosed(t *testing.T) {
	sql := faultlayer.New(newMem(t))
	redis := newMem(t)
	s := newStore(t, tiered.WithSQL(sql), tiered.WithRedis(redis))
	sql.Down()
	var c counter
	k := newKey(t)
	_, err := s.Do(t.Context(), k, "fp", c.fn("x"))
	if !errors.Is(err, idem.ErrUnavailable) || c.runs.Load() != 0 {
		t.Fatalf("SQL down: err %v, runs %d; want ErrUnavailable and no run", err, c.runs.Load())
	}
	// The Redis claim was released: when SQL is back the retry runs.
	sql.Up()
	if _, err := s.Do(t.Context(), k, "fp", c.fn("x")); err != nil || c.runs.Load() != 1 {
		t.Fatalf("after SQL returns: %v, runs %d", err, c.runs.Load())
	}
}

func TestRedisOnlyDownFailsClosed(t *testing.T) {
	redis := faultlayer.New(newMem(t))
	s := newStore(t, tiered.WithRedis(redis))
	redis.Down()
	var c counter
	if _, err := s.Do(t.Context(), newKey(t), "fp", c.fn("x")); !errors.Is(err, idem.ErrUnavailable) || c.runs.Load() != 0 {
		t.Fatalf("err %v runs %d", err, c.runs.Load())
	}
}

func TestFailOpenRunsWithoutDecision(t *testing.T) {
	sql := faultlayer.New(newMem(t))
	rec := newRecorder()
	s := newStore(t, tiered.WithSQL(sql), tiered.WithFailOpen(true), tiered.WithObserver(rec))
	sql.Down()
	var c counter
	r, err := s.Do(t.Context(), newKey(t), "fp", c.fn("x"))
	if err != nil || c.runs.Load() != 1 || r.Tier != idem.TierNone {
		t.Fatalf("fail-open: %+v, %v, runs %d", r, err, c.runs.Load())
	}
	if rec.count("tier_error/sql") == 0 {
		t.Fatal("running without a decision was not reported")
	}
}

func TestDuplicateWaitsThenInFlight(t *testing.T) {
	sql := newMem(t)
	a := newStore(t, tiered.WithSQL(sql), tiered.WithWait(100*time.Millisecond))
	b := newStore(t, tiered.WithSQL(sql), tiered.WithWait(100*time.Millisecond))
	k := newKey(t)
	inWork, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			close(inWork)
			<-finish
			return []byte("slow"), nil
		})
		done <- err
	}()
	<-inWork
	var c counter
	if _, err := b.Do(t.Context(), k, "fp", c.fn("dup")); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("duplicate during long work: %v, want ErrInFlight", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, err := b.Do(t.Context(), k, "fp", c.fn("dup"))
	if err != nil || string(r.Value) != "slow" || c.runs.Load() != 0 {
		t.Fatalf("after completion: %+v %v runs %d", r, err, c.runs.Load())
	}
}

func TestDuplicateWaitsForOwnerResult(t *testing.T) {
	sql := newMem(t)
	a := newStore(t, tiered.WithSQL(sql))
	b := newStore(t, tiered.WithSQL(sql))
	k := newKey(t)
	inWork := make(chan struct{})
	go func() {
		_, _ = a.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
			close(inWork)
			time.Sleep(50 * time.Millisecond)
			return []byte("owner's"), nil
		})
	}()
	<-inWork
	var c counter
	r, err := b.Do(t.Context(), k, "fp", c.fn("dup"))
	if err != nil || string(r.Value) != "owner's" || !r.Replayed || c.runs.Load() != 0 {
		t.Fatalf("waiting duplicate: %+v, %v, runs %d", r, err, c.runs.Load())
	}
}

// A stalled owner whose renewals are refused loses its lease: its work is
// cancelled with cause ErrLeaseLost, another owner takes over, the stale
// completion is rejected, and one result is stored.
func TestStalledOwnerLosesLease(t *testing.T) {
	clockless := newMem(t)
	sql := faultlayer.New(clockless)
	const lease = 60 * time.Millisecond
	rec := newRecorder()
	a := newStore(t, tiered.WithSQL(sql), tiered.WithLease(lease), tiered.WithObserver(rec), tiered.WithLocalCache(0, 0, 0))
	b := newStore(t, tiered.WithSQL(clockless), tiered.WithLease(lease), tiered.WithLocalCache(0, 0, 0), tiered.WithWait(time.Second))
	sql.Fail(errors.New("renewal blocked"), faultlayer.Renew)
	k := newKey(t)
	var cause error
	aDone := make(chan error, 1)
	taken, inWork := make(chan struct{}), make(chan struct{})
	go func() {
		_, err := a.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
			close(inWork)
			<-ctx.Done()
			cause = context.Cause(ctx)
			<-taken // the stale owner finishes only after the takeover
			return []byte("stale"), nil
		})
		aDone <- err
	}()
	<-inWork
	// b waits for a's lease to lapse, takes over and completes.
	var c counter
	r, err := b.Do(t.Context(), k, "fp", c.fn("winner"))
	close(taken)
	if err != nil || string(r.Value) != "winner" || c.runs.Load() != 1 {
		t.Fatalf("takeover: %+v, %v", r, err)
	}
	if err := <-aDone; !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("stale owner: %v, want ErrLeaseLost", err)
	}
	if !errors.Is(cause, idem.ErrLeaseLost) {
		t.Fatalf("stale owner's context cause = %v, want ErrLeaseLost", cause)
	}
	got, err := clockless.Get(t.Context(), k)
	if err != nil || string(got.Result) != "winner" {
		t.Fatalf("stored %q, %v; want the winner's result", got.Result, err)
	}
	if rec.count("lease_lost") == 0 {
		t.Fatal("lease loss not observed")
	}
}

// Close cancels the work of every execution, also of those that begin it
// while Close runs: none is left running on a context Close did not reach.
func TestCloseCancelsWorkBeginningMeanwhile(t *testing.T) {
	s, err := tiered.New(tiered.WithSQL(newMem(t)))
	if err != nil {
		t.Fatal(err)
	}
	const calls = 50
	var wg sync.WaitGroup
	var started, stopped atomic.Int64
	begin := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-begin
			_, _ = s.Do(t.Context(), newKey(t), "fp", func(ctx context.Context) ([]byte, error) {
				started.Add(1)
				select {
				case <-ctx.Done():
					if errors.Is(context.Cause(ctx), idem.ErrClosed) {
						stopped.Add(1)
					}
				case <-time.After(10 * time.Second):
					t.Errorf("call %d: its work was never cancelled", i)
				}
				return nil, ctx.Err()
			})
		})
	}
	close(begin)
	for started.Load() < calls/2 { // Close while the rest are still beginning
		runtime.Gosched()
	}
	_ = s.Close()
	wg.Wait()
	if started.Load() != stopped.Load() {
		t.Fatalf("%d works began, %d were cancelled by Close", started.Load(), stopped.Load())
	}
}

func TestCloseCancelsWorkAndReleases(t *testing.T) {
	sql := newMem(t)
	s, err := tiered.New(tiered.WithSQL(sql))
	if err != nil {
		t.Fatal(err)
	}
	k := newKey(t)
	inWork := make(chan struct{})
	done := make(chan error, 1)
	type valueKey struct{}
	caller := context.WithValue(context.Background(), valueKey{}, "caller's")
	var value any
	var cause error
	go func() {
		_, err := s.Do(caller, k, "fp", func(ctx context.Context) ([]byte, error) {
			value = ctx.Value(valueKey{})
			close(inWork)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-inWork
	_ = s.Close()
	if err := <-done; err == nil {
		t.Fatal("work cancelled by Close reported success")
	}
	if value != "caller's" || !errors.Is(cause, idem.ErrClosed) {
		t.Fatalf("the work saw value %v and cause %v; want the caller's value and idem.ErrClosed", value, cause)
	}
	if _, err := sql.Get(t.Context(), k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after Close the claim is %v, want released", err)
	}
}
