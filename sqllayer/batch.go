package sqllayer

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// MUST AGREE with the single statements. The batcher sends calls that
// queue together in shared statements (batch_reserve.go, batch_complete.go,
// batch_write.go); each call must get the answer its own statements
// (reserve.go, owner.go) would have given it alone.
// FuzzBatchAgreesWithSingle (batch_fuzz_test.go) compares the two on any
// rounds of calls and runs under make test for a few seconds;
// TestBatchedClaimsMixed and TestBatchedCompletionsMixed pin the cases. A
// change to one side alone fails them: change both, or neither.

// batchSlots is how many statements of one kind a Layer has in flight at
// most when batching: one for whatever queued, the others only for full
// batches.
const batchSlots = 4

// maxBatchSize bounds WithBatchSize: a claim takes 7 arguments, and 1024 of
// them stay inside every dialect's limit on bound parameters.
const maxBatchSize = 1024

// maxBatchResult is the largest result a completion may carry and still be
// batched: a larger one goes out in a statement of its own. maxBatchBytes
// bounds the results of one batch together, so that a batched statement
// stays far below the servers' packet limits (MySQL sends a result as
// hexadecimal, twice its size).
const (
	maxBatchResult = 64 << 10
	maxBatchBytes  = 1 << 20
)

// WithBatchSize turns batching on: Reserve, or Complete, calls that queue
// while one of their kind is in flight go out together, up to n in one
// statement (64 is a good start). Default 0: off, every call runs its own
// statements; 0 and 1 keep it off. A negative n, or one above 1024, is an
// error.
//
// Batching pays under concurrency, where it saves statements and commits:
// in the benchmarks (see docs/benchmarks.md), new keys ran at about 1.5 to 2 times
// the throughput of unbatched calls at 16 and 64 concurrent requests on
// Postgres, somewhat less on MariaDB, and on SQLite only at 64; at one
// request at a time it runs what an unbatched call runs, and costs the
// same. It stays off by default: at low concurrency it gains nothing, and
// it changes how concurrent calls reach the database (shared statements
// and transactions, flusher goroutines). Turn it on for a Layer that
// serves many concurrent requests.
//
// Batching costs nothing at low load: a call that finds no statement of its
// kind in flight on this Layer goes out at once, alone, with the statements
// it would run unbatched. Calls that arrive while one is in flight queue,
// and go out together in the next statement as soon as it returns: no
// timer ever holds a call back (the goroutine that sends the next
// statement yields to the scheduler first, while callers it just answered
// keep queueing, so that a Complete that follows its Reserve at once joins
// the next statement). When n calls are queued before that, they go out at
// once in a statement of their own, up to 4 statements of a kind in flight
// on the Layer. On Postgres, claims and completions are one kind: those
// that queue together go out in one statement, one transaction, so that
// they share one commit. Each call's answer is the one it would
// have had alone: a key the batch cannot decide (a lapsed lease in its
// grace or ready to be taken over, a record released meanwhile, the same
// key twice in one batch, a completion whose token no longer matches) is
// decided by that call's own statements afterwards, and a batched
// statement that fails for any reason but an unreachable database is run
// again one call at a time, so that one bad row cannot fail its neighbours.
//
// A caller whose context ends stops waiting at once. If its claim had
// already gone out and won the key, the batch releases it (within that
// claim's lease) so that the key is not held by nobody until the lease
// lapses; if the release fails, or the statement's answer was lost with
// the connection, the claim lapses with its lease, as an unbatched claim
// whose answer was lost does. A completion that had gone out stands.
func WithBatchSize(n int) Option {
	return func(c *config) error {
		if n < 0 || n > maxBatchSize {
			return fmt.Errorf("WithBatchSize: give 0 (off) to %d calls per statement (got %d)", maxBatchSize, n)
		}
		c.batchSize = n
		return nil
	}
}

// batcher groups the calls of one kind that arrive while a statement of
// that kind is in flight, and runs them together in the next statement.
//
// A call that finds no statement of its kind in flight runs alone, on its
// own goroutine and context. Otherwise it queues. When a statement
// returns, whoever ran it hands what queued meanwhile to a flusher
// goroutine, which runs batches in that statement's slot until the queue
// is empty and then frees the slot; after each batch it yields while
// callers keep queueing (gather). When a full batch (max calls) is
// queued and fewer than slots statements are in flight, another flusher
// takes it at once, so that a burst larger than one statement carries does
// not wait for the statements ahead of it. The flushers are owned by the
// batcher and stop with the empty queue; every batch they run is bounded
// by its callers, whose leaving cancels it.
type batcher[In, Out any] struct {
	max    int          // calls per statement
	slots  int          // statements of the kind in flight at most
	weight func(In) int // a batch's inputs weigh at most maxBatchBytes together
	// run answers each input of a batch; ctx ends when every caller left.
	run func(ctx context.Context, ins []In) []Out
	// orphan handles the answer of a caller that left while its input was
	// in flight.
	orphan func(in In, out Out)

	mu       sync.Mutex // guards inflight, peak, queue and each member's run
	inflight int        // statements of this kind in flight
	peak     int        // the most statements of this kind in flight so far
	queue    []*member[In, Out]

	batched atomic.Int64 // calls that went out in a batch
}

// Member states.
const (
	waiting int32 = iota
	delivered
	gone
)

// member is one queued call.
type member[In, Out any] struct {
	in    In
	out   Out
	state atomic.Int32  // waiting, then delivered or gone, once
	done  chan struct{} // closed when out is delivered
	run   *batchRun     // the batch that carries it; guarded by batcher.mu
}

// batchRun is one batch in flight. Its context ends when every caller in
// it left, or when it is done.
type batchRun struct {
	waiting atomic.Int32 // members neither delivered nor left
	ctx     context.Context
	cancel  context.CancelFunc
}

// do answers in: alone when nothing of its kind is in flight, else in a
// batch. ok is false when ctx ended before the answer came.
func (b *batcher[In, Out]) do(ctx context.Context, in In, alone func() Out) (out Out, ok bool) {
	b.mu.Lock()
	if b.inflight == 0 {
		b.inflight, b.peak = 1, max(b.peak, 1)
		b.mu.Unlock()
		defer b.next()
		return alone(), true
	}
	m := &member[In, Out]{in: in, done: make(chan struct{})}
	b.queue = append(b.queue, m)
	b.spare()
	b.mu.Unlock()
	select {
	case <-m.done:
		return m.out, true
	case <-ctx.Done():
	}
	if !m.state.CompareAndSwap(waiting, gone) {
		<-m.done // delivered just now: the answer is the caller's after all
		return m.out, true
	}
	b.mu.Lock()
	r := m.run
	b.mu.Unlock()
	if r != nil && r.waiting.Add(-1) == 0 {
		r.cancel()
	}
	return out, false
}

// spare starts a flusher in a free slot for each full batch queued. b.mu
// is held.
func (b *batcher[In, Out]) spare() {
	for b.inflight < b.slots && len(b.queue) >= b.max {
		ms, r := b.takeLocked()
		if ms == nil {
			return
		}
		b.inflight++
		b.peak = max(b.peak, b.inflight)
		go b.flush(ms, r)
	}
}

// next hands what queued to a flusher in the slot of the statement that
// just returned, or frees the slot.
func (b *batcher[In, Out]) next() {
	ms, r := b.take()
	if ms == nil {
		return
	}
	go b.flush(ms, r)
}

// take removes the next batch from the queue for the slot of the
// statement that just returned, or frees the slot when nothing is waiting.
func (b *batcher[In, Out]) take() ([]*member[In, Out], *batchRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ms, r := b.takeLocked()
	if ms == nil {
		b.inflight--
		return nil, nil
	}
	b.spare()
	return ms, r
}

// takeLocked removes the next batch from the queue, skipping callers that
// left; nil when nobody waits. b.mu is held.
func (b *batcher[In, Out]) takeLocked() ([]*member[In, Out], *batchRun) {
	if len(b.queue) == 0 {
		return nil, nil
	}
	var (
		ms     []*member[In, Out]
		weight int
		i      int
	)
	r := &batchRun{}
	for ; i < len(b.queue) && len(ms) < b.max; i++ {
		m := b.queue[i]
		if m.state.Load() != waiting {
			continue
		}
		w := b.weight(m.in)
		if len(ms) > 0 && weight+w > maxBatchBytes {
			break
		}
		weight += w
		m.run = r
		ms = append(ms, m)
	}
	rest := copy(b.queue, b.queue[i:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	if len(ms) == 0 {
		return nil, nil
	}
	r.waiting.Store(int32(len(ms)))
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return ms, r
}

// flush runs batches until the queue is empty, then frees its slot.
func (b *batcher[In, Out]) flush(ms []*member[In, Out], r *batchRun) {
	for ms != nil {
		b.runOne(ms, r)
		b.gather()
		ms, r = b.take()
	}
}

// gather yields to the scheduler, again while callers keep queueing, up to
// 4 times. The callers a batch just answered often call again at once
// (Complete after Reserve): they run while the flusher yields, and queue
// for its next statement, where without the yield the flusher would send
// what queued so far and leave the rest to wait for that statement. With
// nothing else to run a yield returns at once.
func (b *batcher[In, Out]) gather() {
	for range 4 {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		runtime.Gosched()
		b.mu.Lock()
		grew := len(b.queue) > n
		b.mu.Unlock()
		if !grew {
			return
		}
	}
}

// runOne runs one batch and delivers its answers.
func (b *batcher[In, Out]) runOne(ms []*member[In, Out], r *batchRun) {
	defer r.cancel()
	ins := make([]In, len(ms))
	for i, m := range ms {
		ins[i] = m.in
	}
	b.batched.Add(int64(len(ms)))
	outs := b.run(r.ctx, ins)
	for i, m := range ms {
		m.out = outs[i]
		if m.state.CompareAndSwap(waiting, delivered) {
			close(m.done)
		} else if b.orphan != nil {
			b.orphan(m.in, outs[i])
		}
	}
}
