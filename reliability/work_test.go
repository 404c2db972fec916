package reliability_test

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idem"
)

// recorder is an Observer that counts events by kind, and by kind and tier.
type recorder struct {
	mu     sync.Mutex // guards counts
	counts map[string]int
}

func newRecorder() *recorder { return &recorder{counts: map[string]int{}} }

// Observe implements idem.Observer.
func (r *recorder) Observe(_ context.Context, e idem.Event) {
	r.mu.Lock()
	r.counts[e.Kind.String()]++
	r.counts[e.Kind.String()+"/"+e.Tier.String()]++
	r.mu.Unlock()
}

// count returns how many events named name ("fallback_on", "replayed/sql")
// were seen.
func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// work is a guarded function that counts its runs and can be held inside,
// so that a fault lands while it runs.
type work struct {
	val  string
	runs atomic.Int64

	entered chan struct{} // closed when the first run starts
	once    sync.Once
	hold    chan struct{} // nil: runs return at once; else runs wait until it is closed
	release sync.Once

	// sawCancel is set when a run's context was cancelled while held.
	sawCancel atomic.Bool
}

// newWork returns work that returns val at once.
func newWork(val string) *work {
	return &work{val: val, entered: make(chan struct{})}
}

// heldWork returns work whose runs wait inside until release.
func heldWork(val string) *work {
	w := newWork(val)
	w.hold = make(chan struct{})
	return w
}

// fn is the guarded function.
func (w *work) fn(ctx context.Context) ([]byte, error) {
	w.runs.Add(1)
	w.once.Do(func() { close(w.entered) })
	if w.hold != nil {
		select {
		case <-w.hold:
		case <-ctx.Done():
			w.sawCancel.Store(true)
			<-w.hold
		}
	}
	return []byte(w.val), nil
}

// Release lets held runs finish. It is safe to call more than once.
func (w *work) Release() {
	if w.hold != nil {
		w.release.Do(func() { close(w.hold) })
	}
}
