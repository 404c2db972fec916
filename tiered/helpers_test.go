package tiered_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// newStore builds a Store and closes it when the test ends.
func newStore(t *testing.T, opts ...tiered.Option) *tiered.Store {
	t.Helper()
	s, err := tiered.New(opts...)
	if err != nil {
		t.Fatalf("tiered.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newMem returns a memory layer for a test.
func newMem(t testing.TB, opts ...memlayer.Option) *memlayer.Layer {
	t.Helper()
	return must.Get(memlayer.New(opts...))(t)
}

// recorder is an Observer that counts events by kind and tier.
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
}

func newRecorder() *recorder { return &recorder{counts: map[string]int{}} }

func (r *recorder) Observe(_ context.Context, e idem.Event) {
	r.mu.Lock()
	r.counts[e.Kind.String()+"/"+e.Tier.String()]++
	r.counts[e.Kind.String()]++
	r.mu.Unlock()
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[name]
}

// counter is a Func that counts its runs and returns a fixed value.
type counter struct{ runs atomic.Int64 }

func (c *counter) fn(val string) tiered.Func {
	return func(context.Context) ([]byte, error) {
		c.runs.Add(1)
		return []byte(val), nil
	}
}

var keySeq atomic.Int64

// newKey returns a key no other test uses.
func newKey(t *testing.T) idem.Key {
	return idem.NewKey(t.Name(), strconv.FormatInt(keySeq.Add(1), 10))
}
