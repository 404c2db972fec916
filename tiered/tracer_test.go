package tiered_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// tracer is an Observer and Tracer that counts calls by outcome and events
// by kind, and marks each call's context.
type tracer struct {
	recorder
	mu       sync.Mutex
	outcomes map[idem.Outcome]int
	open     int // calls started and not ended
	started  int
}

type callMark struct{}

func newTracer() *tracer {
	return &tracer{recorder: recorder{counts: map[string]int{}}, outcomes: map[idem.Outcome]int{}}
}

func (tr *tracer) StartCall(ctx context.Context, _ idem.Key) (context.Context, func(idem.CallEnd)) {
	tr.mu.Lock()
	tr.open++
	tr.started++
	tr.mu.Unlock()
	var once sync.Once
	return context.WithValue(ctx, callMark{}, "traced"), func(e idem.CallEnd) {
		once.Do(func() {
			tr.mu.Lock()
			tr.open--
			tr.outcomes[e.Outcome]++
			tr.mu.Unlock()
		})
	}
}

func (tr *tracer) outcome(o idem.Outcome) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.outcomes[o]
}

// Every caller is heard, once, callers that joined another's execution
// included: a burst of twenty on one key, ten with one request and ten with
// another, ends in one execution, nine replays and ten mismatches — each
// counted, as a metric per caller must be.
func TestTracerHearsEveryCaller(t *testing.T) {
	tr := newTracer()
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithObserver(tr))
	k := newKey(t)
	release := make(chan struct{})
	var seen sync.Map
	fn := func(ctx context.Context) ([]byte, error) {
		seen.Store(ctx.Value(callMark{}), true)
		<-release
		return []byte("paid"), nil
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 20 {
		fp := "fp-A"
		if i%2 == 1 {
			fp = "fp-B"
		}
		wg.Go(func() {
			<-start
			_, _ = s.Do(t.Context(), k, fp, fn)
		})
	}
	close(start)
	began := time.Now()
	for { // every caller has started its call before the work may end
		tr.mu.Lock()
		n := tr.started
		tr.mu.Unlock()
		if n == 20 {
			break
		}
		if time.Since(began) > 5*time.Second {
			t.Fatalf("%d calls started", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if tr.open != 0 {
		t.Fatalf("%d calls never ended", tr.open)
	}
	total := 0
	for _, n := range tr.outcomes {
		total += n
	}
	executed := tr.outcome(idem.OutcomeExecuted)
	// The nine that joined the held execution waited for it: each is a
	// replay all the same, never an outcome of its own.
	replayed := tr.outcome(idem.OutcomeReplayed)
	mismatch := tr.outcome(idem.OutcomeMismatch)
	if total != 20 || executed != 1 || replayed != 9 || mismatch != 10 {
		t.Fatalf("outcomes %v: want 20 calls, 1 executed, 9 replayed, 10 mismatches", tr.outcomes)
	}
	if n := tr.count("mismatch"); n != 10 {
		t.Fatalf("%d mismatch events, want one per caller (10)", n)
	}
	if _, ok := seen.Load("traced"); !ok {
		t.Fatal("the work did not run under the call's traced context")
	}
}

// The layers report to the Store's observer, handed down with each call:
// a takeover of a crashed owner's claim, and the grace before it, reach it
// without being given to the layer.
func TestLayerEventsReachTheStoresObserver(t *testing.T) {
	st := stacktest.Real(t)
	sql := st.SQLLayer(t)
	k := newKey(t)
	const lease = time.Second // room for a loaded shared database: the completion gets lease/8
	if _, ok, err := sql.Reserve(t.Context(), k, "fp", lease, time.Hour); err != nil || !ok {
		t.Fatalf("the crashed owner's claim: %v, %v", ok, err)
	}
	tr := newTracer()
	s := newStore(t, tiered.WithSQL(sql), tiered.WithObserver(tr), tiered.WithLease(lease), tiered.WithWait(5*time.Second))
	var c counter
	if r, err := s.Do(t.Context(), k, "fp", c.fn("ran")); err != nil || string(r.Value) != "ran" {
		t.Fatalf("retry after the crash: %+v, %v", r, err)
	}
	if tr.count("grace") != 1 || tr.count("takeover") != 1 {
		t.Fatalf("events %v: want the grace and the takeover", tr.counts)
	}
	if tr.count("claimed/sql") != 1 || tr.count("completed/sql") != 1 || tr.count("tier_call/sql") < 3 {
		t.Fatalf("events %v: want the claim, the completion and the tier calls", tr.counts)
	}
}

// A Store given two tracers combined with idem.Observers (Prometheus and
// OpenTelemetry, say) traces every call on both, the work running under
// the context of both, and the events still reach a plain observer beside
// them.
func TestTracersCombinedStillTrace(t *testing.T) {
	a, b := newTracer(), newTracer()
	plain := &recorder{counts: map[string]int{}}
	s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithObserver(idem.Observers(plain, a, b)))
	k := newKey(t)
	var mark any
	if _, err := s.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
		mark = ctx.Value(callMark{})
		return []byte("paid"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*tracer{"first": a, "second": b} {
		if tr.outcome(idem.OutcomeExecuted) != 1 || tr.outcome(idem.OutcomeReplayed) != 1 || tr.open != 0 {
			t.Errorf("%s tracer: outcomes %v, %d open; want one executed, one replayed, none open", name, tr.outcomes, tr.open)
		}
	}
	if mark != "traced" {
		t.Error("the work did not run under the call's traced context")
	}
	if plain.count("executed") != 1 || plain.count("replayed") != 1 {
		t.Errorf("plain observer heard %v, want one executed and one replayed", plain.counts)
	}
}
