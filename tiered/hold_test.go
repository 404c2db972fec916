package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// An owner holds its lease until its completion is accepted, not only
// while fn runs (DESIGN §9). The deciding tier refuses the completion, but
// takes renewals, for several leases; a duplicate on another instance that
// reaches the tier all along never takes the key over and never runs fn.
// The owner's caller hears that the result is not stored yet; once the
// completion lands, the duplicate replays it.
func TestOwnerHoldsLeaseWhileCompletionPending(t *testing.T) {
	const lease = 300 * time.Millisecond
	shared := newMem(t)
	sql := faultlayer.New(shared)
	rec := newRecorder()
	owner := newStore(t, tiered.WithSQL(sql), tiered.WithLease(lease), tiered.WithObserver(rec))
	dup := newStore(t, tiered.WithSQL(shared), tiered.WithLease(lease), tiered.WithWait(20*time.Millisecond), tiered.WithLocalCache(0, 0, 0))
	k := newKey(t)
	var runs atomic.Int64
	fn := func(context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			sql.Fail(fmt.Errorf("%w: completion refused", idem.ErrUnavailable), faultlayer.Complete)
		}
		return []byte("charged"), nil
	}
	r, err := owner.Do(t.Context(), k, "fp", fn)
	for end := time.Now().Add(4 * lease); time.Now().Before(end); {
		if _, err := dup.Do(t.Context(), k, "fp", fn); !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("duplicate during the pending completion: %v, want ErrInFlight", err)
		}
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times: the duplicate took the key over", runs.Load())
		}
	}
	if !errors.Is(err, idem.ErrUnavailable) || string(r.Value) != "charged" {
		t.Fatalf("owner: %+v, %v; want its value and ErrUnavailable (not stored yet)", r, err)
	}
	sql.Fail(nil, faultlayer.Complete)
	eventually(t, func() error {
		r, err := dup.Do(t.Context(), k, "fp", fn)
		if err != nil || string(r.Value) != "charged" {
			return fmt.Errorf("%+v, %v", r, err)
		}
		return nil
	})
	if runs.Load() != 1 || rec.count("lease_lost") != 0 {
		t.Fatalf("runs %d, events %v", runs.Load(), rec.counts)
	}
}

// After an outage that hit every instance for longer than the lease, the
// owner's pending completion lands before a duplicate that retries all the
// while takes the key over: the layers give a lapsed lease a grace, and the
// owner retries within it.
func TestCompletionLandsFirstAfterOutage(t *testing.T) {
	const lease = 400 * time.Millisecond
	shared := newMem(t)
	ownerSQL, dupSQL := faultlayer.New(shared), faultlayer.New(shared)
	owner := newStore(t, tiered.WithSQL(ownerSQL), tiered.WithLease(lease))
	dup := newStore(t, tiered.WithSQL(dupSQL), tiered.WithLease(lease), tiered.WithWait(0), tiered.WithLocalCache(0, 0, 0))
	k := newKey(t)
	var runs atomic.Int64
	fn := func(context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			ownerSQL.Down() // the outage begins as the work ends
			dupSQL.Down()
		}
		return []byte("charged"), nil
	}
	if _, err := owner.Do(t.Context(), k, "fp", fn); !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("owner: %v, want ErrUnavailable", err)
	}
	var got tiered.Result
	var gotErr error
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // a client that retries without pause, during and after the outage
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := dup.Do(t.Context(), k, "fp", fn)
			if err == nil {
				got, gotErr = r, nil
				return
			}
			if !errors.Is(err, idem.ErrUnavailable) && !errors.Is(err, idem.ErrInFlight) {
				got, gotErr = r, err
				return
			}
		}
	})
	time.Sleep(3 * lease) // the outage outlasts the lease
	ownerSQL.Up()
	dupSQL.Up()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(stop)
		<-done
		t.Fatal("the duplicate never got an answer")
	}
	if gotErr != nil || string(got.Value) != "charged" || runs.Load() != 1 {
		t.Fatalf("duplicate: %+v, %v, runs %d; want the owner's result, fn run once", got, gotErr, runs.Load())
	}
}

// eventually retries check until it returns nil, for at most 10 s.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Executions of different lengths that overlap all keep their claims: each
// long one is renewed when its own renewal is due, whatever the others do,
// so that a duplicate on another instance never takes one over.
func TestOverlappingExecutionsEachRenewed(t *testing.T) {
	const lease = 150 * time.Millisecond
	shared := newMem(t)
	rec := newRecorder()
	owner := newStore(t, tiered.WithSQL(shared), tiered.WithLease(lease), tiered.WithObserver(rec))
	dup := newStore(t, tiered.WithSQL(shared), tiered.WithLease(lease), tiered.WithWait(0), tiered.WithLocalCache(0, 0, 0))
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	end := func() { once.Do(func() { close(release) }) }
	defer end() // before the wait, and before the Stores close
	long := []idem.Key{newKey(t), newKey(t), newKey(t)}
	for i, k := range long {
		started := make(chan struct{})
		wg.Go(func() {
			_, err := owner.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("long"), nil
			})
			if err != nil {
				t.Errorf("long execution %d: %v", i, err)
			}
		})
		<-started
		time.Sleep(lease / 5) // each is due at another time
	}
	var dupRuns atomic.Int64
	for end := time.Now().Add(4 * lease); time.Now().Before(end); {
		var short counter
		if _, err := owner.Do(t.Context(), newKey(t), "fp", short.fn("short")); err != nil {
			t.Fatal(err)
		}
		for _, k := range long {
			_, err := dup.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
				dupRuns.Add(1)
				return nil, nil
			})
			if !errors.Is(err, idem.ErrInFlight) {
				t.Fatalf("duplicate of a long execution: %v, want ErrInFlight", err)
			}
		}
		time.Sleep(lease / 10)
	}
	end()
	wg.Wait()
	if dupRuns.Load() != 0 || rec.count("lease_lost") != 0 {
		t.Fatalf("duplicates ran %d times, events %v", dupRuns.Load(), rec.counts)
	}
	if n := rec.count("renewed"); n < 3*len(long) {
		t.Fatalf("%d renewals, want at least 3 for each long execution", n)
	}
}

// A closed Store is not kept alive by the timer of its renewals, which the
// runtime may hold until the time it was armed for (lease/3 after a call):
// a program that closes a Store gets its memory back at the next
// collection.
func TestClosedStoreIsCollected(t *testing.T) {
	collected := make(chan struct{})
	func() {
		s, err := tiered.New(tiered.WithSQL(newMem(t)))
		if err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(s, func(ch chan struct{}) { close(ch) }, collected)
		var c counter
		if _, err := s.Do(t.Context(), newKey(t), "fp", c.fn("v")); err != nil { // arms the timer
			t.Fatal(err)
		}
		_ = s.Close()
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("a closed Store was still reachable after 50 collections")
}
