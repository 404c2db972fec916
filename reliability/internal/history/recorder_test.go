package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idemkit/idem/reliability/internal/history"
)

// errLeaseLost stands for idem.ErrLeaseLost, which this package does not
// know: the recorder's user classifies causes.
var errLeaseLost = errors.New("lease lost")

var errMismatch = errors.New("mismatch")

// onceStore is a correct store in one process: the first caller of a key
// runs fn, duplicates wait for it and replay, a failure releases the key.
type onceStore struct {
	mu   sync.Mutex
	recs map[string]*onceRec
}

type onceRec struct {
	fp   string
	done chan struct{}
	val  []byte
	ok   bool
}

func (s *onceStore) do(ctx context.Context, key, fp string, fn func(context.Context) ([]byte, error)) (val []byte, replayed bool, err error) {
	for {
		s.mu.Lock()
		r := s.recs[key]
		if r == nil {
			r = &onceRec{fp: fp, done: make(chan struct{})}
			s.recs[key] = r
			s.mu.Unlock()
			val, err := fn(ctx)
			s.mu.Lock()
			if err != nil {
				delete(s.recs, key)
			} else {
				r.val, r.ok = val, true
			}
			s.mu.Unlock()
			close(r.done)
			return val, false, err
		}
		s.mu.Unlock()
		if r.fp != fp {
			return nil, false, errMismatch
		}
		<-r.done
		if r.ok {
			return r.val, true, nil
		}
	}
}

// recordCall is how a workload records one call: Invoke, an fn that records its
// execution, and Return with the outcome mapped from the answer.
func recordCall(rec *history.Recorder, s *onceStore, key, fp string, fail bool) {
	p := rec.Invoke(key, fp)
	val, replayed, err := s.do(context.Background(), key, fp, func(ctx context.Context) ([]byte, error) {
		x := p.ExecStart("")
		x.Watch(ctx, func(cause error) bool { return errors.Is(cause, errLeaseLost) })
		v := []byte(fmt.Sprintf("%s|%s|%s", x.ID(), key, fp))
		var err error
		if fail {
			err = errors.New("boom")
		}
		x.End(v, err)
		return v, err
	})
	out := history.Executed
	switch {
	case errors.Is(err, errMismatch):
		out = history.Mismatch
	case err != nil:
		out = history.FnFailed
	case replayed:
		out = history.Replayed
	}
	p.Return(out, val, err)
}

// A run of many goroutines on several recorders, streams merged: a
// correct store gives a history without anomalies, with every line whole.
func TestRecorderRecordsACorrectRun(t *testing.T) {
	s := &onceStore{recs: map[string]*onceRec{}}
	var bufs [3]bytes.Buffer
	var recs [3]*history.Recorder
	var mus [3]sync.Mutex
	for i := range recs {
		recs[i] = history.NewRecorder(&lockedWriter{mu: &mus[i], w: &bufs[i]}, fmt.Sprintf("n%d", i), nil)
	}
	f := recs[0].Fault(history.RedisPause, "", "none really")
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Go(func() {
			rec := recs[g%3]
			for i := range 20 {
				key := fmt.Sprintf("k%d", (g*7+i)%25)
				fp := "f"
				if i%9 == 8 {
					fp = "other"
				}
				recordCall(rec, s, key, fp, i%5 == 0)
			}
		})
	}
	wg.Wait()
	f.End()
	for key, r := range s.recs {
		recs[2].Final(history.Final{Key: key, SQL: history.Stored{State: history.Completed, Fingerprint: r.fp, Value: r.val}})
	}
	for i, r := range recs {
		if err := r.Err(); err != nil {
			t.Fatalf("recorder %d: %v", i, err)
		}
	}
	var parts []*history.History
	for i := range bufs {
		parts = append(parts, decode(t, bufs[i].Bytes()))
	}
	h := history.Merge(parts...)
	if len(h.Calls) != 600 || h.Truncated != 0 || len(h.Problems) != 0 {
		t.Fatalf("%d calls, %d truncated, problems %v; want 600, 0, none", len(h.Calls), h.Truncated, h.Problems)
	}
	for _, c := range h.Calls {
		if c.Return < c.Invoke || c.Outcome == history.Unknown {
			t.Fatalf("call %+v not returned", c)
		}
	}
	r := history.Check(h, history.Options{})
	for _, a := range r.Anomalies {
		t.Error(a)
	}
	if r.Summary.Outcomes[history.Executed] == 0 || r.Summary.Outcomes[history.Replayed] == 0 || r.Summary.Outcomes[history.FnFailed] == 0 {
		t.Errorf("the run did not exercise every path:\n%s", r.Summary)
	}
}

// lockedWriter lets a test read a buffer a recorder writes to.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The work's context cancelled while fn runs is recorded with its cause
// and class; a context cancelled after fn returned (the Store cancels it
// on the way out) is not.
func TestRecorderWatchesTheWorkContext(t *testing.T) {
	var b bytes.Buffer
	rec := history.NewRecorder(&b, "n", clockFrom(1))
	leaseLost := func(cause error) bool { return errors.Is(cause, errLeaseLost) }

	p := rec.Invoke("k", "f")
	ctx, cancel := context.WithCancelCause(context.Background())
	x := p.ExecStart("tok")
	x.Watch(ctx, leaseLost)
	cancel(fmt.Errorf("renewal refused: %w", errLeaseLost))
	x.End(nil, context.Canceled) // once End returns, the cancellation is written
	p.Return(history.LeaseLost, nil, errLeaseLost)

	p2 := rec.Invoke("k", "f")
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	x2 := p2.ExecStart("")
	x2.Watch(ctx2, leaseLost)
	x2.End([]byte("v"), nil)
	cancel2(context.Canceled)
	x2.Completion(history.CompletionAccepted)
	p2.Return(history.Executed, []byte("v"), nil)

	h := decode(t, b.Bytes())
	e := h.Execs[0]
	if e.Canceled == 0 || !e.LeaseLost || e.Cause != "renewal refused: lease lost" || e.Token != "tok" || !e.Failed {
		t.Errorf("first execution %+v: want a lease-lost cancellation and a failure", e)
	}
	e2 := h.Execs[1]
	if e2.Canceled != 0 || e2.Completion != history.CompletionAccepted || e2.Completed == 0 {
		t.Errorf("second execution %+v: want no cancellation and an accepted completion", e2)
	}
	if h.Calls[1].Exec != e2.ID || h.Calls[0].Exec != e.ID {
		t.Errorf("calls %+v do not name their executions", h.Calls)
	}
}

// clockFrom is a clock that ticks once per reading.
func clockFrom(t int64) func() int64 {
	var mu sync.Mutex
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		t++
		return t
	}
}

// An execution that starts after its caller gave up is still recorded,
// and the caller's return does not claim it.
func TestRecorderExecutionAfterReturn(t *testing.T) {
	var b bytes.Buffer
	rec := history.NewRecorder(&b, "n", clockFrom(1))
	p := rec.Invoke("k", "f")
	p.Return(history.Canceled, nil, context.Canceled)
	x := p.ExecStart("")
	x.End([]byte("v"), nil)
	p.Return(history.Executed, []byte("v"), nil) // only the first return counts
	h := decode(t, b.Bytes())
	if len(h.Calls) != 1 || h.Calls[0].Outcome != history.Canceled || h.Calls[0].Exec != "" || h.Execs[0].Call != p.ID() {
		t.Fatalf("got %+v and %+v", h.Calls, h.Execs)
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

// After a write error the recorder writes nothing more and says why.
func TestRecorderStopsAtTheFirstWriteError(t *testing.T) {
	w := &failingWriter{n: 1}
	rec := history.NewRecorder(w, "n", nil)
	rec.Invoke("k", "f").Return(history.Unavailable, nil, errors.New("down"))
	rec.Invoke("k", "f")
	if err := rec.Err(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Err = %v, want disk full", err)
	}
}

// fn often returns because its context was cancelled, and then End can
// run before the watcher has written the cancellation down. The
// cancellation came first, so it must be recorded all the same.
func TestRecorderCancellationRacingEnd(t *testing.T) {
	var (
		mu      sync.Mutex
		n       int64
		inClock = make(chan struct{})
		release = make(chan struct{})
	)
	const watcherReading = 3 // Invoke, ExecStart, then the watcher
	clock := func() int64 {
		mu.Lock()
		n++
		me := n
		mu.Unlock()
		if me == watcherReading {
			close(inClock)
			<-release
		}
		return me
	}
	var buf bytes.Buffer
	var bufMu sync.Mutex
	rec := history.NewRecorder(&lockedWriter{mu: &bufMu, w: &buf}, "n", clock)
	p := rec.Invoke("k", "f")
	x := p.ExecStart("")
	ctx, cancel := context.WithCancelCause(context.Background())
	x.Watch(ctx, func(cause error) bool { return errors.Is(cause, errLeaseLost) })
	cancel(errLeaseLost)
	<-inClock // the watcher has started and is held
	x.End(nil, context.Canceled)
	close(release)
	p.Return(history.LeaseLost, nil, errLeaseLost)

	bufMu.Lock()
	h := decode(t, slices.Clone(buf.Bytes()))
	bufMu.Unlock()
	e := h.Execs[0]
	if e.Canceled == 0 || !e.LeaseLost || e.Canceled > e.End {
		t.Fatalf("execution %+v: want its lease-lost cancellation, no later than its end", e)
	}
}

// A client that records its requests to a service, and the service that
// records its executions, in two processes: the client's recorder names
// the serving process as the call's node, the service's names the call as
// the request carried it, and the workload links an Executed call to its
// execution once the two streams are merged.
func TestRecorderAcrossProcesses(t *testing.T) {
	var client, service bytes.Buffer
	rc := history.NewRecorder(&client, "client", nil)
	rs := history.NewRecorder(&service, "svc1", nil)

	p := rc.InvokeOn("svc1", "k", "f")
	x := rs.ExecFor(p.ID(), "k", "f", "")
	x.End([]byte("v|"+x.ID()), nil)
	x.Completion(history.CompletionAccepted)
	p.Return(history.Replayed, []byte("v|"+x.ID()), nil) // the client cannot tell yet
	q := rc.InvokeOn("svc1", "k", "f")
	q.Return(history.Replayed, []byte("v|"+x.ID()), nil)

	h := history.Merge(decode(t, client.Bytes()), decode(t, service.Bytes()))
	if len(h.Calls) != 2 || len(h.Execs) != 1 || len(h.Problems) != 0 {
		t.Fatalf("%d calls, %d executions, problems %v", len(h.Calls), len(h.Execs), h.Problems)
	}
	e := h.Execs[0]
	if e.Node != "svc1" || e.Call != p.ID() {
		t.Fatalf("execution %+v: want node svc1, call %s", e, p.ID())
	}
	for i := range h.Calls {
		c := &h.Calls[i]
		if c.Node != "svc1" {
			t.Fatalf("call %s on node %q, want the serving process svc1", c.ID, c.Node)
		}
		if c.ID == e.Call { // the link the workload makes
			c.Outcome, c.Exec = history.Executed, e.ID
		}
	}
	if r := history.Check(h, history.Options{}); !r.OK() {
		t.Fatalf("anomalies in a correct run: %v", r.Anomalies)
	}
}
