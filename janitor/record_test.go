package janitor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/janitor"
)

// runs is a SweepRecorder that keeps what it is told, and fails to record
// when fail is set.
type runs struct {
	janitor.Sweeper
	mu      sync.Mutex
	deleted []int64
	fail    error
}

func (r *runs) RecordSweep(_ context.Context, deleted int64, took time.Duration, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if took <= 0 || err != nil {
		return errors.New("a run recorded without its time, or with an error")
	}
	r.deleted = append(r.deleted, deleted)
	return r.fail
}

// Each sweep an instance ran is recorded once, with what it deleted; a
// sweep another instance held the lock for is not; a recording that fails
// is reported and changes nothing else.
func TestSweepsAreRecorded(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		l := st.SQLLayer(t)
		seed(t, l, 5, 30)
		r := &runs{Sweeper: &watched{Sweeper: l, hold: 5 * time.Millisecond}}
		key := st.Prefix + "janitor-runs"
		var swept atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			j, err := janitor.New(r, janitor.WithLock(client(t, st.Redis)), janitor.WithLockKey(key), janitor.WithLockTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for range 10 {
					if _, ok, err := j.Sweep(t.Context()); err != nil {
						t.Error(err)
					} else if ok {
						swept.Add(1)
					}
				}
			})
		}
		wg.Wait()
		var total int64
		for _, d := range r.deleted {
			total += d
		}
		if int64(len(r.deleted)) != swept.Load() || total != 30 {
			t.Fatalf("%d runs recorded deleting %d rows, want the %d sweeps that ran, deleting 30", len(r.deleted), total, swept.Load())
		}
		r.fail = errors.New("audit table unreachable")
		rec := &recorder{}
		j, err := janitor.New(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := j.Sweep(idem.ContextWithObserver(t.Context(), rec)); !ok || err != nil {
			t.Fatalf("a sweep whose recording fails: %v %v, want it swept", ok, err)
		}
		if rec.counts[idem.EventTierError] != 1 {
			t.Fatalf("the failed recording was reported %d times, want once", rec.counts[idem.EventTierError])
		}
	})
}
