package sqllayer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedBatcher is a batcher whose batches wait for a signal, recording what
// each batch carried and which answers found their caller gone.
type gatedBatcher struct {
	b       *batcher[int, int]
	release chan struct{}
	started chan []int // each batch's inputs, when it starts
	ctxs    chan context.Context
	mu      sync.Mutex
	orphans []int
}

func newGated(max int, weight func(int) int) *gatedBatcher {
	g := &gatedBatcher{release: make(chan struct{}), started: make(chan []int, 16), ctxs: make(chan context.Context, 16)}
	g.b = &batcher[int, int]{max: max, slots: 1, weight: weight,
		run: func(ctx context.Context, ins []int) []int {
			g.started <- append([]int(nil), ins...)
			g.ctxs <- ctx
			<-g.release
			out := make([]int, len(ins))
			for i, in := range ins {
				out[i] = -in
			}
			return out
		},
		orphan: func(in, out int) {
			g.mu.Lock()
			g.orphans = append(g.orphans, in)
			g.mu.Unlock()
		}}
	return g
}

// queued waits until n calls are queued.
func (g *gatedBatcher) queued(t *testing.T, n int) {
	t.Helper()
	for {
		g.b.mu.Lock()
		q := len(g.b.queue)
		g.b.mu.Unlock()
		if q == n {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%d queued, want %d", q, n)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestBatcherAloneThenBatches(t *testing.T) {
	g := newGated(3, func(int) int { return 0 })
	lone := make(chan struct{})
	aloneDone := make(chan int)
	go func() {
		out, ok := g.b.do(t.Context(), 100, func() int { <-lone; return 1 })
		if !ok {
			t.Error("the lone call was not answered")
		}
		aloneDone <- out
	}()
	for {
		g.b.mu.Lock()
		busy := g.b.inflight > 0
		g.b.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	results := make(chan [2]int, 5)
	for i := 1; i <= 5; i++ {
		go func() {
			out, ok := g.b.do(t.Context(), i, func() int { t.Error("a queued call ran alone"); return 0 })
			if !ok {
				t.Error("a queued call was not answered")
			}
			results <- [2]int{i, out}
		}()
	}
	g.queued(t, 5)
	close(lone)
	if out := <-aloneDone; out != 1 {
		t.Fatalf("alone answered %d", out)
	}
	first := <-g.started
	if len(first) != 3 {
		t.Fatalf("first batch carried %v, want the bound of 3", first)
	}
	g.release <- struct{}{}
	second := <-g.started
	if len(second) != 2 {
		t.Fatalf("second batch carried %v, want the 2 left", second)
	}
	g.release <- struct{}{}
	for range 5 {
		r := <-results
		if r[1] != -r[0] {
			t.Errorf("call %d got %d", r[0], r[1])
		}
	}
	if n := g.b.batched.Load(); n != 5 {
		t.Errorf("batched %d calls, want 5", n)
	}
}

func TestBatcherWeightBound(t *testing.T) {
	g := newGated(10, func(int) int { return maxBatchBytes / 2 })
	g.b.inflight = 1 // a statement in flight
	for i := 1; i <= 3; i++ {
		go g.b.do(t.Context(), i, func() int { return 0 })
	}
	g.queued(t, 3)
	g.b.next()
	if first := <-g.started; len(first) != 2 {
		t.Fatalf("first batch carried %v, want 2 (the byte bound)", first)
	}
	g.release <- struct{}{}
	if second := <-g.started; len(second) != 1 {
		t.Fatalf("second batch carried %v", second)
	}
	g.release <- struct{}{}
}

// A caller that leaves while queued is never sent; one that leaves while its
// batch is in flight stops waiting at once, and its answer goes to orphan;
// the batch's context ends only when every caller in it left.
func TestBatcherCallersLeave(t *testing.T) {
	g := newGated(10, func(int) int { return 0 })
	g.b.inflight = 1
	ctx1, cancel1 := context.WithCancel(t.Context())
	ctx2, cancel2 := context.WithCancel(t.Context())
	ctx3, cancel3 := context.WithCancel(t.Context())
	errs := make(chan error, 3)
	for i, c := range []context.Context{ctx1, ctx2, ctx3} {
		go func() {
			if _, ok := g.b.do(c, i+1, func() int { return 0 }); !ok {
				errs <- c.Err()
				return
			}
			errs <- nil
		}()
	}
	g.queued(t, 3)
	cancel1() // leaves while queued
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a queued caller that left got %v", err)
	}
	g.b.next()
	batch := <-g.started
	if len(batch) != 2 || batch[0] == 1 || batch[1] == 1 {
		t.Fatalf("batch carried %v, want 2 and 3", batch)
	}
	runCtx := <-g.ctxs
	cancel2() // leaves while in flight
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller in flight that left got %v", err)
	}
	if runCtx.Err() != nil {
		t.Fatal("the batch was cancelled while a caller still waited")
	}
	cancel3()
	<-errs
	<-runCtx.Done() // every caller left
	g.release <- struct{}{}
	for {
		g.b.mu.Lock()
		busy := g.b.inflight > 0
		g.b.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.orphans) != 2 {
		t.Errorf("orphans %v, want the answers of 2 and 3", g.orphans)
	}
}

// A full batch queued behind a statement in flight goes out at once in a
// free slot; the statements in flight never exceed the slots, and every
// call is answered.
func TestBatcherFullBatchesTakeSpareSlots(t *testing.T) {
	g := newGated(2, func(int) int { return 0 })
	var running, most atomic.Int32
	run := g.b.run
	g.b.run = func(ctx context.Context, ins []int) []int {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer running.Add(-1)
		return run(ctx, ins)
	}
	g.b.slots = 2
	g.b.inflight = 1 // a statement in flight, which the test returns below
	results := make(chan [2]int, 5)
	for i := 1; i <= 5; i++ {
		go func() {
			out, ok := g.b.do(t.Context(), i, func() int { t.Error("a call ran alone"); return 0 })
			if !ok {
				t.Error("a call was not answered")
			}
			results <- [2]int{i, out}
		}()
	}
	if first := <-g.started; len(first) != 2 {
		t.Fatalf("the spare slot took %v, want a full batch of 2", first)
	}
	g.queued(t, 3)
	g.release <- struct{}{} // the spare slot's batch returns and takes the next full batch
	if second := <-g.started; len(second) != 2 {
		t.Fatalf("the spare slot's next batch carried %v, want 2", second)
	}
	g.queued(t, 1)
	g.b.next() // the statement in flight returns and takes what is left
	if third := <-g.started; len(third) != 1 {
		t.Fatalf("the first slot's batch carried %v, want the 1 left", third)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 5 {
		if r := <-results; r[1] != -r[0] {
			t.Errorf("call %d got %d", r[0], r[1])
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d batches ran at once, want at most the 2 slots", m)
	}
	for {
		busy, queued, _, peak := g.b.state()
		if !busy && queued == 0 {
			if peak != 2 {
				t.Errorf("at most %d statements were in flight at once, want 2", peak)
			}
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal("the batcher did not go idle")
		case <-time.After(time.Millisecond):
		}
	}
}

// TestChangedBy: a batched MySQL completion that changed fewer rows than
// it carried tells the rows it changed (one instant, n of them) from rows
// its tokens completed before, and claims none when it cannot tell.
func TestChangedBy(t *testing.T) {
	row := func(key string, at int64) completedRow { return completedRow{key: key, at: at} }
	for _, c := range []struct {
		name  string
		found []completedRow
		n     int
		want  []string
	}{
		{"nothing changed", []completedRow{row("a", 5)}, 0, nil},
		{"every row found", []completedRow{row("a", 5), row("b", 9)}, 2, []string{"a", "b"}},
		{"one instant shared by n", []completedRow{row("a", 5), row("b", 9), row("c", 9)}, 2, []string{"b", "c"}},
		{"re-sent rows apart", []completedRow{row("a", 5), row("b", 9), row("c", 9), row("d", 3)}, 2, []string{"b", "c"}},
		{"more rows than n at one instant", []completedRow{row("a", 9), row("b", 9), row("c", 9)}, 2, nil},
		{"two instants of n rows", []completedRow{row("a", 5), row("b", 9)}, 1, nil},
		{"no instant of n rows", []completedRow{row("a", 5), row("b", 9), row("c", 7)}, 2, nil},
	} {
		got := changedBy(c.found, c.n)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for _, k := range c.want {
			if !got[k] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}
