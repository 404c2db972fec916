package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/reliability/internal/history"
	"github.com/idemkit/idem/tiered"
)

// These tests record the real Store, as the doc says a workload should,
// and check what it did: several Stores (nodes) over one in-memory
// deciding layer, no faults. They show the checker's verdicts fit the
// Store's actual answers — none on a correct layer, the right one on a
// broken layer.

var (
	errWork  = errors.New("work failed (a 5xx)")
	errPanic = errors.New("work panicked")
)

// outcomeOf maps Do's answer as doc.go describes: errors first.
func outcomeOf(ctx context.Context, res tiered.Result, err error) history.Outcome {
	var pe *tiered.PanicError
	switch {
	case err == nil && res.Replayed:
		return history.Replayed
	case err == nil:
		return history.Executed
	case ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		return history.Canceled
	case errors.As(err, &pe):
		return history.Panicked
	case errors.Is(err, tiered.ErrNotReplayable):
		return history.NotReplayable
	case errors.Is(err, idem.ErrLeaseLost):
		return history.LeaseLost
	case errors.Is(err, idem.ErrMismatch):
		return history.Mismatch
	case errors.Is(err, idem.ErrInFlight):
		return history.InFlight
	case errors.Is(err, idem.ErrUnavailable):
		return history.Unavailable
	case errors.Is(err, idem.ErrClosed):
		return history.Closed
	case errors.Is(err, errWork):
		return history.FnFailed
	}
	return history.OtherError
}

// node is one Store and the recorder of its calls.
type node struct {
	store *tiered.Store
	rec   *history.Recorder
}

func newNode(t *testing.T, name string, layer idem.Layer, w *syncBuffer) *node {
	t.Helper()
	s, err := tiered.New(tiered.WithSQL(layer), tiered.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &node{store: s, rec: history.NewRecorder(w, name, nil)}
}

type mode int

const (
	succeed mode = iota
	fail
	panics
)

// do records one call of Do whose work succeeds, fails or panics.
func (n *node) do(ctx context.Context, key, fp string, m mode) {
	p := n.rec.Invoke(key, fp)
	res, err := n.store.Do(ctx, idem.NewKey("", key), fp, func(ctx context.Context) ([]byte, error) {
		x := p.ExecStart("")
		x.Watch(ctx, func(cause error) bool { return errors.Is(cause, idem.ErrLeaseLost) })
		v := fmt.Appendf(nil, "%s|%s|%s", x.ID(), key, fp)
		switch m {
		case fail:
			x.End(v, errWork)
			return v, errWork
		case panics:
			x.End(nil, errPanic)
			panic(errPanic)
		}
		x.End(v, nil)
		return v, nil
	})
	p.Return(outcomeOf(ctx, res, err), res.Value, err)
}

// finals reads every key's record from the deciding layer.
func finals(t *testing.T, rec *history.Recorder, layer idem.Layer, keys []string) {
	t.Helper()
	for _, k := range keys {
		f := history.Final{Key: k, SQL: history.Stored{State: history.Absent}}
		r, err := layer.Get(context.Background(), idem.NewKey("", k))
		switch {
		case errors.Is(err, idem.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case r.Completed():
			f.SQL = history.Stored{State: history.Completed, Fingerprint: r.Fingerprint, Value: r.Result}
		default:
			f.SQL = history.Stored{State: history.InProgress, Fingerprint: r.Fingerprint}
		}
		rec.Final(f)
	}
}

// syncBuffer is a buffer recorders of one stream share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) history(t *testing.T) *history.History {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return decode(t, s.b.Bytes())
}

func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("order-%d", i)
	}
	return keys
}

// Many concurrent duplicates on three Stores, with work that fails and
// panics now and then and requests that reuse a key with another body:
// the real Store keeps every promise.
func TestRealStoreKeepsItsPromises(t *testing.T) {
	layer := must.Get(memlayer.New())(t)
	keys := keyNames(40)
	var streams [3]syncBuffer
	nodes := make([]*node, len(streams))
	for i := range nodes {
		nodes[i] = newNode(t, fmt.Sprintf("n%d", i), layer, &streams[i])
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			n := nodes[g%len(nodes)]
			for range 25 {
				fp, m := "f", succeed
				switch x := r.IntN(20); {
				case x == 0:
					fp = "g"
				case x < 7:
					m = fail
				case x < 10:
					m = panics
				}
				n.do(t.Context(), keys[r.IntN(len(keys))], fp, m)
			}
		})
	}
	wg.Wait()
	var fin syncBuffer
	finals(t, history.NewRecorder(&fin, "reader", nil), layer, keys)
	h := history.Merge(streams[0].history(t), streams[1].history(t), streams[2].history(t), fin.history(t))
	r := history.Check(h, history.Options{})
	for _, a := range r.Anomalies {
		t.Error(a)
	}
	s := r.Summary
	if s.Calls != 300 || s.Outcomes[history.Executed] == 0 || s.Outcomes[history.Replayed] == 0 || s.Outcomes[history.FnFailed]+s.Outcomes[history.Panicked] == 0 {
		t.Errorf("the run did not exercise the paths it should:\n%s", s)
	}
	t.Logf("\n%s", s)
}

// amnesiac is a deciding layer that can forget everything, as a database
// restored from an old backup would.
type amnesiac struct {
	mu sync.Mutex
	l  *memlayer.Layer
}

func (a *amnesiac) layer() *memlayer.Layer { a.mu.Lock(); defer a.mu.Unlock(); return a.l }
func (a *amnesiac) forget(t *testing.T) {
	fresh := must.Get(memlayer.New())(t)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.l = fresh
}

func (a *amnesiac) Reserve(ctx context.Context, key idem.Key, fp string, lease, ttl time.Duration) (idem.Record, bool, error) {
	return a.layer().Reserve(ctx, key, fp, lease, ttl)
}

func (a *amnesiac) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	return a.layer().Complete(ctx, key, token, result, ttl)
}

func (a *amnesiac) Release(ctx context.Context, key idem.Key, token string) error {
	return a.layer().Release(ctx, key, token)
}

func (a *amnesiac) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	return a.layer().Renew(ctx, key, token, lease)
}

func (a *amnesiac) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	return a.layer().Get(ctx, key)
}

// A deciding layer that loses its records lets the work run twice through
// the real Store; the checker says so, on every key it happened to.
func TestRealStoreOnAForgetfulLayer(t *testing.T) {
	layer := &amnesiac{l: must.Get(memlayer.New())(t)}
	keys := keyNames(5)
	var s1, s2 syncBuffer
	first := newNode(t, "n1", layer, &s1)
	for _, k := range keys {
		first.do(t.Context(), k, "f", succeed)
	}
	layer.forget(t)
	second := newNode(t, "n2", layer, &s2) // a fresh process: no local cache
	for _, k := range keys {
		second.do(t.Context(), k, "f", succeed)
	}
	var fin syncBuffer
	finals(t, history.NewRecorder(&fin, "reader", nil), layer, keys)
	r := history.Check(history.Merge(s1.history(t), s2.history(t), fin.history(t)), history.Options{})
	if got := r.Count(history.DuplicateExecution); got != len(keys) || len(r.Anomalies) != len(keys) {
		t.Errorf("%d duplicate executions among %v; want one per key and nothing else", got, r.Anomalies)
	}
}
