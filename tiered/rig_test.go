package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// rig is a set of backends that several Stores share, as instances of one
// service do: a memory layer alone, or Redis and a database. Every Store
// it makes sees its layers through fault layers, which count the calls
// (renewals in particular) that Store sends.
type rig struct {
	name string
	// st is the stack of Redis and a database, or nil for the memory
	// layer alone.
	st *stacktest.Stack
	// sql is a SQL layer of the rig's own on the stack's tables, for
	// reading records and completing reservations; nil without a stack.
	sql *sqllayer.Layer
	mem idem.Layer // the shared memory layer, without a stack

	mu     sync.Mutex
	layers []*faultlayer.Layer // every layer a Store was given, for counting
}

// eachRig runs fn as a subtest over the memory layer, over real Redis and
// Postgres, and over the embedded stack (miniredis and SQLite).
func eachRig(t *testing.T, fn func(t *testing.T, r *rig)) {
	t.Helper()
	t.Run("memlayer", func(t *testing.T) { fn(t, &rig{name: "memlayer", mem: newMem(t)}) })
	t.Run("real", func(t *testing.T) { fn(t, newStackRig(t, "real", stacktest.Real(t))) })
	t.Run("embedded", func(t *testing.T) { fn(t, newStackRig(t, "embedded", stacktest.Embedded(t))) })
}

// eachSQLRig runs fn as a subtest over the rigs where a SQL layer decides:
// real Redis and Postgres, and the embedded stack.
func eachSQLRig(t *testing.T, fn func(t *testing.T, r *rig)) {
	t.Helper()
	t.Run("real", func(t *testing.T) { fn(t, newStackRig(t, "real", stacktest.Real(t))) })
	t.Run("embedded", func(t *testing.T) { fn(t, newStackRig(t, "embedded", stacktest.Embedded(t))) })
}

func newStackRig(t *testing.T, name string, st *stacktest.Stack) *rig {
	t.Helper()
	return &rig{name: name, st: st, sql: st.SQLLayer(t)}
}

// sqlDecides reports whether a SQL layer decides, so that fn can complete
// its reservation in a transaction of its own.
func (r *rig) sqlDecides() bool { return r.st != nil }

// wrap returns a fault layer over l, counted among the rig's.
func (r *rig) wrap(l idem.Layer) *faultlayer.Layer {
	f := faultlayer.New(l)
	r.mu.Lock()
	r.layers = append(r.layers, f)
	r.mu.Unlock()
	return f
}

// store returns a Store over the rig's backends (extra options after the
// defaults), closed when the test ends, and the fault layer of its deciding
// tier.
func (r *rig) store(t *testing.T, opts ...tiered.Option) (*tiered.Store, *faultlayer.Layer) {
	t.Helper()
	var base []tiered.Option
	var decides *faultlayer.Layer
	if r.st == nil {
		decides = r.wrap(r.mem)
		base = []tiered.Option{tiered.WithSQL(decides)}
	} else {
		decides = r.wrap(r.st.SQLLayer(t))
		base = []tiered.Option{
			tiered.WithRedis(r.wrap(r.st.RedisLayer(t)).Waiting()), tiered.WithSQL(decides),
			tiered.WithTimeouts(2*time.Second, 10*time.Second),
		}
	}
	return newStore(t, append(base, opts...)...), decides
}

// renewals returns how many renewals every Store of the rig sent, in every
// tier.
func (r *rig) renewals() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, l := range r.layers {
		n += l.Calls(faultlayer.Renew)
	}
	return n
}

// get reads key's record in the deciding tier.
func (r *rig) get(ctx context.Context, key idem.Key) (idem.Record, error) {
	if r.st == nil {
		return r.mem.Get(ctx, key)
	}
	return r.sql.Get(ctx, key)
}

// stored checks what the deciding tier holds for key once its execution
// has ended: a completed record with want, or (want nil) no record at all,
// the claim released. An execution that goes on after its caller gave up
// ends on its own: the check waits for it.
func (r *rig) stored(t *testing.T, key idem.Key, want []byte) {
	t.Helper()
	eventually(t, func() error {
		rec, err := r.get(t.Context(), key)
		switch {
		case want == nil && errors.Is(err, idem.ErrNotFound):
			return nil
		case want == nil:
			return fmt.Errorf("the deciding tier holds %+v, %v; want no record (released)", rec, err)
		case err != nil || !rec.Completed() || string(rec.Result) != string(want):
			return fmt.Errorf("the deciding tier holds %+v, %v; want completed with %q", rec, err, want)
		}
		return nil
	})
}

// joinSignal is a caller's context that tells when the caller waits for
// an execution another caller in this process leads. Do asks a context's
// Done once before it joins the table of calls in flight (whether the
// caller can give up), and once more as it waits for the leader: the
// second call is the signal. A caller that led instead would run its own
// function, which the tests that use it count.
type joinSignal struct {
	context.Context
	calls  atomic.Int64
	once   sync.Once
	joined chan struct{}
}

func newJoinSignal(ctx context.Context) *joinSignal {
	return &joinSignal{Context: ctx, joined: make(chan struct{})}
}

func (j *joinSignal) Done() <-chan struct{} {
	if j.calls.Add(1) >= 2 {
		j.once.Do(func() { close(j.joined) })
	}
	return j.Context.Done()
}

// within waits for ch, failing the test rather than hanging when it does
// not come.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: still waiting after 15s", what)
		var zero T
		return zero
	}
}

// answered is what a call of Do made on a goroutine of its own got. returned
// is false when Do did not return: fn called runtime.Goexit on the
// caller's goroutine.
type answered struct {
	res      tiered.Result
	err      error
	returned bool
}

func (a answered) String() string {
	if !a.returned {
		return "no answer (the goroutine exited)"
	}
	return fmt.Sprintf("%+v, %v", a.res, a.err)
}

// doOn calls s.Do on a goroutine of its own and delivers its answer, also
// when the goroutine exits without one.
func doOn(ctx context.Context, s *tiered.Store, key idem.Key, fn tiered.Func) <-chan answered {
	ch := make(chan answered, 1)
	go func() {
		var a answered
		defer func() { ch <- a }()
		a.res, a.err = s.Do(ctx, key, "fp", fn)
		a.returned = true
	}()
	return ch
}
