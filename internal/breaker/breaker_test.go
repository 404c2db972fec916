package breaker_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/breaker"
)

// A breaker stays on through fewer failures in a row than its bound,
// switches off at the bound (once: later failures switch nothing), skips
// calls for the cool-down, lets one probe through after it, and is on
// again at the first success.
func TestBreakerSwitchesOffAndBack(t *testing.T) {
	b := breaker.New(3, time.Minute)
	now := time.Now()
	for i := range 2 {
		if b.Failure(now) {
			t.Fatalf("failure %d switched off before the bound", i+1)
		}
		if use, probe := b.Allow(now); !use || probe {
			t.Fatalf("after %d failures: use %v probe %v; want on", i+1, use, probe)
		}
	}
	if b.Success() {
		t.Fatal("a success while on reported a switch")
	}
	for i := range 2 {
		b.Failure(now)
		if b.Off() {
			t.Fatalf("off after %d failures since a success; the count starts over", i+1)
		}
	}
	if !b.Failure(now) || !b.Off() {
		t.Fatal("the third failure in a row did not switch off")
	}
	if b.Failure(now) {
		t.Fatal("a failure while off reported a second switch")
	}
	if use, _ := b.Allow(now.Add(time.Minute - time.Second)); use {
		t.Fatal("a call was let through during the cool-down")
	}
	after := now.Add(time.Minute)
	if use, probe := b.Allow(after); !use || !probe {
		t.Fatalf("after the cool-down: use %v probe %v; want one probe", use, probe)
	}
	if use, _ := b.Allow(after); use {
		t.Fatal("a second call was let through while the probe is out")
	}
	if !b.Success() || b.Off() {
		t.Fatal("the probe's success did not switch back on")
	}
	if use, probe := b.Allow(after); !use || probe {
		t.Fatalf("back on: use %v probe %v", use, probe)
	}
}

// A failed probe switches off for another cool-down from its failure,
// without reporting a new switch.
func TestFailedProbeStaysOff(t *testing.T) {
	b := breaker.New(1, time.Minute)
	now := time.Now()
	b.Failure(now)
	probeAt := now.Add(time.Minute)
	if use, probe := b.Allow(probeAt); !use || !probe {
		t.Fatal("no probe after the cool-down")
	}
	if b.Failure(probeAt) {
		t.Fatal("a failed probe reported a new switch")
	}
	if use, _ := b.Allow(probeAt.Add(time.Minute - time.Second)); use {
		t.Fatal("let through within the cool-down after the failed probe")
	}
	if use, probe := b.Allow(probeAt.Add(time.Minute)); !use || !probe {
		t.Fatal("no probe after the second cool-down")
	}
}

// A bound of 0 never switches off.
func TestZeroNeverSwitchesOff(t *testing.T) {
	b := breaker.New(0, time.Minute)
	now := time.Now()
	for range 100 {
		if b.Failure(now) {
			t.Fatal("switched off with a bound of 0")
		}
	}
	if use, _ := b.Allow(now); !use || b.Off() {
		t.Fatal("off with a bound of 0")
	}
}

// However many calls race after the cool-down, exactly one probes.
func TestOneProbeAtATime(t *testing.T) {
	b := breaker.New(1, time.Millisecond)
	now := time.Now()
	b.Failure(now)
	var probes atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if use, probe := b.Allow(now.Add(time.Second)); use && probe {
				probes.Add(1)
			} else if use {
				t.Error("a call other than the probe was let through")
			}
		})
	}
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes, want 1", n)
	}
}
