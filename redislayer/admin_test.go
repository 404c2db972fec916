package redislayer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

func adminCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// On the real server: an operator reads a claim with its token, the
// release is a compare-and-set on it (a completion that lands first wins),
// a completed record is freed only by Forget, and a lapsed claim is listed.
func TestAdminRedis(t *testing.T) {
	ctx := adminCtx(t)
	l := newLayer(t, testenv.RealRedis(t).Client(t), redislayer.WithPrefix(testenv.Prefix()))
	a := l.Admin()
	key := idem.NewKey("tenant-a", "pay-1")
	rec, claimed, err := l.Reserve(ctx, key, "fp", time.Minute, time.Hour)
	if err != nil || !claimed {
		t.Fatalf("Reserve: %v %v", claimed, err)
	}
	e := must.Get(a.Inspect(ctx, key))(t)
	if e.Token != rec.Token || e.State != idem.StateInProgress || e.Fingerprint != "fp" || e.LeaseLeft <= 0 || e.ExpiresIn <= 0 {
		t.Fatalf("Inspect = %+v, want the claim of token %q", e, rec.Token)
	}
	if out := must.Get(a.Forget(ctx, e))(t); out != redislayer.Changed {
		t.Fatalf("Forget of a claim = %s, want changed", out)
	}
	if out := must.Get(a.Release(ctx, e))(t); out != redislayer.Freed {
		t.Fatalf("Release = %s, want freed", out)
	}
	if err := l.Complete(ctx, key, rec.Token, []byte("late"), time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("old owner's Complete after the release: %v, want ErrLeaseLost", err)
	}
	if out := must.Get(a.Release(ctx, e))(t); out != redislayer.Absent {
		t.Fatalf("Release again = %s, want absent", out)
	}
	// A new claim has a new token: the entry read before is not it.
	if _, claimed, err := l.Reserve(ctx, key, "fp", time.Minute, time.Hour); err != nil || !claimed {
		t.Fatalf("Reserve after the release: %v %v", claimed, err)
	}
	if out := must.Get(a.Release(ctx, e))(t); out != redislayer.Changed {
		t.Fatalf("Release of the old token over a new claim = %s, want changed", out)
	}
	if err := l.Release(ctx, key, must.Get(a.Inspect(ctx, key))(t).Token); err != nil {
		t.Fatal(err)
	}

	// The owner completes between the read and the release.
	rec, _, _ = l.Reserve(ctx, key, "fp", time.Minute, time.Hour)
	e = must.Get(a.Inspect(ctx, key))(t)
	if err := l.Complete(ctx, key, rec.Token, []byte("paid"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if out := must.Get(a.Release(ctx, e))(t); out != redislayer.Changed {
		t.Fatalf("Release after the owner completed = %s, want changed", out)
	}
	done := must.Get(a.Inspect(ctx, key))(t)
	if done.State != idem.StateCompleted || string(done.Result) != "paid" {
		t.Fatalf("record = %+v, want the owner's result", done)
	}
	if out := must.Get(a.Forget(ctx, done))(t); out != redislayer.Freed {
		t.Fatalf("Forget = %s, want freed", out)
	}

	// At once: exactly one of the release and the completion wins.
	for i := range 20 {
		key := idem.NewKey("tenant-a", fmt.Sprint("race-", i))
		rec, _, _ := l.Reserve(ctx, key, "fp", time.Minute, time.Hour)
		e := must.Get(a.Inspect(ctx, key))(t)
		var wg sync.WaitGroup
		var out redislayer.Outcome
		var relErr, cerr error
		start := make(chan struct{})
		wg.Go(func() { <-start; out, relErr = a.Release(ctx, e) })
		wg.Go(func() { <-start; cerr = l.Complete(ctx, key, rec.Token, []byte("paid"), time.Hour) })
		close(start)
		wg.Wait()
		got, gerr := l.Get(ctx, key)
		switch {
		case relErr != nil:
			t.Fatal(relErr)
		case out == redislayer.Freed && errors.Is(cerr, idem.ErrLeaseLost) && errors.Is(gerr, idem.ErrNotFound):
		case out == redislayer.Changed && cerr == nil && string(got.Result) == "paid":
		default:
			t.Fatalf("race %d: release %s, complete %v, Get %+v %v", i, out, cerr, got, gerr)
		}
	}

	// A lapsed claim is stuck; a live one is not.
	lapsed := idem.NewKey("tenant-b", "slow")
	if _, _, err := l.Reserve(ctx, lapsed, "fp", 20*time.Millisecond, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Reserve(ctx, idem.NewKey("tenant-b", "live"), "fp", time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := must.Get(a.Stuck(ctx, 10))(t)
		if len(got) == 1 && got[0].Key.Equal(lapsed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stuck = %+v, want the lapsed claim alone", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// On a Cluster, Stuck scans every master: lapsed claims in every slot are
// found.
func TestAdminStuckOnACluster(t *testing.T) {
	ctx := adminCtx(t)
	rc := testenv.StartRedisCluster(t)
	l := newLayer(t, rc.Client(t), redislayer.WithPrefix(testenv.Prefix()))
	want := map[string]bool{}
	for i := range 12 { // spread over the three masters' slots
		key := idem.NewKey("tenant", fmt.Sprint("k-", i))
		if _, _, err := l.Reserve(ctx, key, "fp", 20*time.Millisecond, time.Hour); err != nil {
			t.Fatal(err)
		}
		want[key.Hex()] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := must.Get(l.Admin().Stuck(ctx, 100))(t)
		found := 0
		for _, e := range got {
			if want[e.Key.Hex()] {
				found++
			}
		}
		if found == len(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stuck found %d of %d lapsed claims: %+v", found, len(want), got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
