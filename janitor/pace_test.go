package janitor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/sqllayer"
)

var _ janitor.BatchSweeper = (*sqllayer.Layer)(nil)

// rowsOf is a BatchSweeper over a count of expired rows, each costing
// perRow to delete, that records the batches it was given and the time
// its statements took.
type rowsOf struct {
	perRow time.Duration

	mu      sync.Mutex
	left    int
	batches []int
	busy    time.Duration // the statements' time, summed
}

func (r *rowsOf) DeleteExpired(context.Context, int) (int64, error) {
	return 0, errors.New("rowsOf: a paced sweep calls DeleteExpiredBatch")
}

func (r *rowsOf) DeleteExpiredBatch(ctx context.Context, batch int) (int64, error) {
	r.mu.Lock()
	n := min(batch, r.left)
	r.left -= n
	r.batches = append(r.batches, batch)
	r.mu.Unlock()
	start := time.Now()
	time.Sleep(time.Duration(n) * r.perRow)
	r.mu.Lock()
	r.busy += time.Since(start)
	r.mu.Unlock()
	return int64(n), ctx.Err()
}

// A paced sweep deletes every row, starts with a small batch and sizes the
// next ones from what a row cost, never beyond WithBatch, and pauses after
// each statement so that statements run at most the duty cycle's share of
// the sweep's time.
func TestPacedSweepSizesItsBatchesAndPauses(t *testing.T) {
	r := &rowsOf{perRow: 20 * time.Microsecond, left: 3000}
	j, err := janitor.New(r, janitor.WithBatch(400), janitor.WithStatementTime(4*time.Millisecond), janitor.WithDutyCycle(0.25))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, swept, err := j.Sweep(t.Context())
	took := time.Since(start)
	if err != nil || !swept || n != 3000 {
		t.Fatalf("swept %v, %d rows, %v; want all 3000", swept, n, err)
	}
	if r.batches[0] != 100 {
		t.Errorf("first batch %d, want 100 (nothing measured yet)", r.batches[0])
	}
	grew := false
	for i, b := range r.batches {
		if b < 50 || b > 400 {
			t.Fatalf("batch %d of %d rows, want 50 to 400 (WithBatch)", i, b)
		}
		if i > 0 && b > 2*r.batches[i-1] {
			t.Fatalf("batch %d of %d rows after %d: more than doubled", i, b, r.batches[i-1])
		}
		grew = grew || b > 100
	}
	if !grew {
		t.Errorf("batches %v: none grew past the first, though a row costs a fifth of the statement time's 1%%", r.batches)
	}
	// Each pause is three times its statement (duty 0.25), and the last
	// statement, which found fewer rows than its batch, has none.
	if min := 3 * (r.busy - r.busy/time.Duration(len(r.batches))); took < min {
		t.Errorf("the sweep took %v with %v in statements: paused less than %v", took, r.busy, min)
	}
}

// A rate bounds the rows a second, beyond what the duty cycle asks.
func TestPacedSweepKeepsItsRate(t *testing.T) {
	r := &rowsOf{left: 500}
	j, err := janitor.New(r, janitor.WithBatch(100), janitor.WithDutyCycle(1), janitor.WithRate(5000))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if n, _, err := j.Sweep(t.Context()); err != nil || n != 500 {
		t.Fatalf("%d rows, %v; want 500", n, err)
	}
	// 500 rows at 5000 a second: 100 ms, less the last batch, which
	// pauses for nothing.
	if took := time.Since(start); took < 60*time.Millisecond {
		t.Fatalf("500 rows at 5000 rows/s swept in %v", took)
	}
}

// A sweep in its pause stops when its context ends.
func TestPacedSweepStopsInItsPause(t *testing.T) {
	r := &rowsOf{perRow: 10 * time.Microsecond, left: 1 << 30}
	j, err := janitor.New(r, janitor.WithDutyCycle(0.001))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := j.Sweep(ctx)
		done <- err
	}()
	for {
		r.mu.Lock()
		n := len(r.batches)
		r.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled sweep returned %v", err)
	}
}

// A *sqllayer.Layer is swept paced, in small statements: every expired row
// goes, no live one.
func TestPacedSweepOfALayer(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		l := st.SQLLayer(t)
		live := seed(t, l, 20, 300)
		j, err := janitor.New(l, janitor.WithBatch(40), janitor.WithDutyCycle(0.5))
		if err != nil {
			t.Fatal(err)
		}
		if n, _, err := j.Sweep(t.Context()); err != nil || n != 300 {
			t.Fatalf("%d rows, %v; want 300", n, err)
		}
		for _, k := range live {
			if _, err := l.Get(t.Context(), k); err != nil {
				t.Fatalf("a live record is gone: %v", err)
			}
		}
		if n := rows(t, st); n != int64(len(live)) {
			t.Fatalf("%d rows left, want the %d live ones", n, len(live))
		}
	})
}
