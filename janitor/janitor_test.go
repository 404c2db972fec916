package janitor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// watched is a Sweeper that counts the sweeps running at once and records
// the batch each was given.
type watched struct {
	janitor.Sweeper
	active, most atomic.Int64
	hold         time.Duration
	mu           sync.Mutex
	batches      []int
}

func (w *watched) DeleteExpired(ctx context.Context, batch int) (int64, error) {
	n := w.active.Add(1)
	defer w.active.Add(-1)
	for {
		m := w.most.Load()
		if n <= m || w.most.CompareAndSwap(m, n) {
			break
		}
	}
	w.mu.Lock()
	w.batches = append(w.batches, batch)
	w.mu.Unlock()
	if w.hold > 0 {
		t := time.NewTimer(w.hold)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return w.Sweeper.DeleteExpired(ctx, batch)
}

// recorder counts events by kind and sums their N.
type recorder struct {
	mu     sync.Mutex
	counts map[idem.EventKind]int
	rows   int64
}

func (r *recorder) Observe(_ context.Context, e idem.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[idem.EventKind]int{}
	}
	r.counts[e.Kind]++
	if e.Kind == idem.EventSwept {
		r.rows += e.N
	}
}

// client returns a Redis client of the test's own (one per instance, as
// separate processes would have), closed when the test ends.
func client(t *testing.T, r *testenv.Redis) *redis.Client {
	t.Helper()
	c := r.Client(t)
	return c
}

// seed stores live records (completed and in progress, each with a day to
// live) and records that expire at once, and waits until those have.
func seed(t *testing.T, l *sqllayer.Layer, live, expired int) []idem.Key {
	t.Helper()
	ctx := t.Context()
	var keys []idem.Key
	for i := range live {
		k := idem.NewKey(t.Name(), fmt.Sprintf("live-%d", i))
		rec, ok, err := l.Reserve(ctx, k, "fp", time.Hour, 24*time.Hour)
		if err != nil || !ok {
			t.Fatalf("Reserve: %v %v", ok, err)
		}
		if i%2 == 0 {
			if err := l.Complete(ctx, k, rec.Token, []byte("kept"), 24*time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, k)
	}
	for i := range expired {
		k := idem.NewKey(t.Name(), fmt.Sprintf("expired-%d", i))
		rec, ok, err := l.Reserve(ctx, k, "fp", 10*time.Millisecond, 10*time.Millisecond)
		if err != nil || !ok {
			t.Fatalf("Reserve: %v %v", ok, err)
		}
		if i%2 == 0 {
			_ = l.Complete(ctx, k, rec.Token, []byte("gone"), 10*time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond) // past every short expiry, by any clock here
	return keys
}

// Several instances, each with its own Redis client, sweep one table: one
// sweeps at a time, the expired rows go, no live row is ever deleted, and
// the observer hears how many rows went.
func TestOneSweepsAtATime(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		l := st.SQLLayer(t)
		live := seed(t, l, 40, 300)
		w := &watched{Sweeper: l, hold: 5 * time.Millisecond}
		rec := &recorder{}
		key := st.Prefix + "janitor"
		var swept, skipped atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			j, err := janitor.New(w, janitor.WithLock(client(t, st.Redis)), janitor.WithLockKey(key),
				janitor.WithBatch(25), janitor.WithLockTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for range 30 {
					_, ok, err := j.Sweep(idem.ContextWithObserver(t.Context(), rec))
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						swept.Add(1)
					} else {
						skipped.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if m := w.most.Load(); m != 1 {
			t.Fatalf("%d sweeps ran at once, want 1", m)
		}
		if swept.Load() == 0 || skipped.Load() == 0 {
			t.Fatalf("%d sweeps, %d turned away: the instances never met", swept.Load(), skipped.Load())
		}
		for _, b := range w.batches {
			if b != 25 {
				t.Fatalf("a sweep was given batch %d, want 25", b)
			}
		}
		for _, k := range live {
			if _, err := l.Get(t.Context(), k); err != nil {
				t.Fatalf("a live record is gone: %v", err)
			}
		}
		if n := rows(t, st); n != int64(len(live)) {
			t.Fatalf("%d rows left, want the %d live ones", n, len(live))
		}
		if rec.rows != 300 {
			t.Fatalf("the observer heard of %d rows deleted, want 300", rec.rows)
		}
	})
}

// rows counts the records left in the stack's table.
func rows(t *testing.T, st *stacktest.Stack) int64 {
	t.Helper()
	var n int64
	if err := st.DB(t).NewSelect().Table(st.Records).ColumnExpr("count(*)").Scan(t.Context(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A sweeper that crashed — no refresh, no release — holds the lock no
// longer than its TTL: another instance sweeps once it lapses, not before.
func TestCrashedSweeperHoldsTheLockAtMostItsTTL(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		if st.Redis.Mini != nil {
			st.Redis.Mini.ClockTTL(true) // TTLs run down by the wall clock, as a server's do
		}
		l := st.SQLLayer(t)
		const ttl = 1500 * time.Millisecond // refreshed every 500 ms, each within 500 ms: slack for a loaded machine
		key := st.Prefix + "janitor"
		crashing := client(t, st.Redis)
		entered, crash := make(chan struct{}), make(chan struct{})
		a, err := janitor.New(&crasher{entered: entered, crash: crash}, janitor.WithLock(crashing), janitor.WithLockKey(key), janitor.WithLockTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _, _, _ = a.Sweep(t.Context()) }()
		<-entered
		// The process dies: its connections go, so it neither refreshes nor
		// releases the lock.
		_ = crashing.Close()
		close(crash)
		<-done
		other := client(t, st.Redis)
		left, err := other.PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left <= 0 || left > ttl {
			t.Fatalf("the crashed sweeper's lock has %v to live, want at most its TTL %v", left, ttl)
		}
		b, err := janitor.New(l, janitor.WithLock(other), janitor.WithLockKey(key), janitor.WithLockTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := b.Sweep(t.Context()); err != nil || ok {
			t.Fatalf("another instance swept while the lock lived: %v, %v", ok, err)
		}
		deadline := time.Now().Add(left + 2*time.Second)
		for {
			_, ok, err := b.Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lock outlived the crashed sweeper by more than its TTL")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// crasher is a Sweeper that signals entered, then waits for crash and
// fails as a dead process's last statement would.
type crasher struct{ entered, crash chan struct{} }

func (c *crasher) DeleteExpired(ctx context.Context, _ int) (int64, error) {
	close(c.entered)
	<-c.crash
	return 0, errors.New("the process died")
}

// With Redis unreachable the janitor does not stop sweeping: it sweeps
// without the lock, in small batches, and tells the observer why.
func TestRedisDownSweepsInSmallBatches(t *testing.T) {
	st := stacktest.Embedded(t)
	l := st.SQLLayer(t)
	seed(t, l, 2, 120)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = down.Close() })
	w := &watched{Sweeper: l}
	rec := &recorder{}
	j, err := janitor.New(w, janitor.WithLock(down), janitor.WithBatch(500))
	if err != nil {
		t.Fatal(err)
	}
	n, ok, err := j.Sweep(idem.ContextWithObserver(t.Context(), rec))
	if err != nil || !ok || n != 120 {
		t.Fatalf("sweep with Redis down: %d rows, swept %v, %v; want all 120", n, ok, err)
	}
	if len(w.batches) != 1 || w.batches[0] > 50 {
		t.Fatalf("batches %v, want one of at most 50", w.batches)
	}
	if rec.counts[idem.EventTierError] != 1 || rec.rows != 120 {
		t.Fatalf("events %v, rows %d", rec.counts, rec.rows)
	}
}

// Run sweeps at once and on every tick, and returns when its context ends.
func TestRunSweepsUntilCancelled(t *testing.T) {
	st := stacktest.Embedded(t)
	l := st.SQLLayer(t)
	w := &watched{Sweeper: l}
	j, err := janitor.New(w, janitor.WithInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.batches)
		w.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Nonsense configuration is an error from New, never a panic later.
func TestNewValidates(t *testing.T) {
	st := stacktest.Embedded(t)
	l := st.SQLLayer(t)
	// Each error names the package and the option at fault, and says what
	// to give instead.
	for name, opt := range map[string]janitor.Option{
		"WithInterval":      janitor.WithInterval(0),
		"WithBatch":         janitor.WithBatch(-1),
		"WithLockTTL":       janitor.WithLockTTL(time.Millisecond),
		"WithLockKey":       janitor.WithLockKey(""),
		"WithLock":          janitor.WithLock(nil),
		"WithStatementTime": janitor.WithStatementTime(0),
		"WithDutyCycle":     janitor.WithDutyCycle(1.5),
		"WithRate":          janitor.WithRate(0),
	} {
		_, err := janitor.New(l, opt)
		if want := "idem: configuration error: janitor: " + name + ": give "; !errors.Is(err, idem.ErrConfig) || !strings.HasPrefix(fmt.Sprint(err), want) {
			t.Errorf("%s: %v, want ErrConfig starting %q", name, err, want)
		}
	}
	if _, err := janitor.New(nil); !errors.Is(err, idem.ErrConfig) || !strings.HasPrefix(err.Error(), "idem: configuration error: janitor: New: give a Sweeper") {
		t.Errorf("nil sweeper: %v", err)
	}
}

// A Store given the Janitor runs it from New until Close: the expired rows
// go, the live ones stay, the Store's observer hears the sweeps, and Close
// stops the Janitor (goleak checks that nothing is left running). On the
// real stack and the embedded one, two Stores sharing one lock.
func TestStoreRunsItsJanitor(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		l := st.SQLLayer(t)
		live := seed(t, l, 4, 9)
		rec := &recorder{}
		var stores []*tiered.Store
		for range 2 {
			j, err := janitor.New(st.SQLLayer(t), janitor.WithInterval(20*time.Millisecond), janitor.WithBatch(2),
				janitor.WithLock(client(t, st.Redis)), janitor.WithLockKey(st.Prefix+"janitor"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := tiered.New(tiered.WithSQL(st.SQLLayer(t)), tiered.WithObserver(rec), tiered.WithJanitor(j))
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, s)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			rec.mu.Lock()
			rows := rec.rows
			rec.mu.Unlock()
			if rows == 9 {
				break
			}
			if rows > 9 || time.Now().After(deadline) {
				t.Fatalf("%d rows swept, want 9", rows)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, s := range stores {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range live {
			if _, err := l.Get(t.Context(), k); err != nil {
				t.Fatalf("live record %v: %v", k, err)
			}
		}
	})
}

func TestWithJanitorNil(t *testing.T) {
	l := stacktest.Embedded(t).SQLLayer(t)
	if _, err := tiered.New(tiered.WithSQL(l), tiered.WithJanitor(nil)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("WithJanitor(nil): %v", err)
	}
}

// failing is a Sweeper whose sweeps fail.
type failing struct{ calls atomic.Int64 }

func (f *failing) DeleteExpired(context.Context, int) (int64, error) {
	f.calls.Add(1)
	return 0, errors.New("relation is locked")
}

// A failed sweep is reported to the observer and tried again at the next
// tick.
func TestFailedSweepsAreReportedAndRetried(t *testing.T) {
	f := &failing{}
	rec := &recorder{}
	j, err := janitor.New(f, janitor.WithInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(idem.ContextWithObserver(t.Context(), rec))
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for f.calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps", f.calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.counts[idem.EventTierError] < 3 || rec.counts[idem.EventSwept] != 0 {
		t.Fatalf("events %v", rec.counts)
	}
}
