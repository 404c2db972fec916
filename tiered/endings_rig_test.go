package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// The stores the endings table runs on, and how a row is checked.

// store returns a Store over the rig's backends, made WithAtomic in the
// atomic mode, and the fault layer of its deciding tier.
func (e *endingEnv) store(t *testing.T, opts ...tiered.Option) (*tiered.Store, *faultlayer.Layer) {
	t.Helper()
	if !e.atomic {
		return e.r.store(t, opts...)
	}
	return e.atomicStore(t, e.r.st.SQLLayer(t), opts...)
}

// atomicStore returns an atomic Store that decides through l, with the
// rig's Redis in front.
func (e *endingEnv) atomicStore(t *testing.T, l *sqllayer.Layer, opts ...tiered.Option) (*tiered.Store, *faultlayer.Layer) {
	t.Helper()
	decides := e.r.wrap(l)
	runs, ok := decides.Atomic()
	if !ok {
		t.Fatalf("%T runs no atomic executions", l)
	}
	base := []tiered.Option{
		tiered.WithRedis(e.r.wrap(e.r.st.RedisLayer(t)).Waiting()), tiered.WithSQL(runs), tiered.WithAtomic(true),
		tiered.WithTimeouts(2*time.Second, 10*time.Second),
	}
	return newStore(t, append(base, opts...)...), decides
}

func (row ending) check(t *testing.T, r *rig, atomic bool) {
	e := &endingEnv{r: r, atomic: atomic, lease: row.lease, started: make(chan struct{}), release: make(chan struct{})}
	var opts []tiered.Option
	if row.lease > 0 {
		opts = append(opts, tiered.WithLease(row.lease))
	}
	e.a, e.aLayer = e.store(t, opts...)
	e.b, _ = e.store(t)
	if r.sqlDecides() {
		e.sql = e.aLayer.Inner.(*sqllayer.Layer)
		e.ledger = newLedger(t, r.st)
	}
	e.key = newKey(t)
	e.id = e.key.String()
	// The rows name what fn's transaction writes by its prefix; it ends
	// with the key's ID.
	expand := func(s string) string {
		if s == charged {
			return charged + e.id
		}
		return s
	}

	got := row.first(t, e)
	if !got.returned {
		t.Fatalf("first caller: %v", got)
	}
	if string(got.res.Value) != expand(row.value) {
		t.Errorf("first caller got value %q; want %q", got.res.Value, expand(row.value))
	}
	var pe *tiered.PanicError
	switch {
	case len(row.errs) == 0 && got.err != nil:
		t.Errorf("first caller got error %v; want none", got.err)
	case len(row.errs) > 0 && got.err == nil:
		t.Errorf("first caller got no error; want %v", row.errs)
	}
	for _, want := range row.errs {
		if want == errPanicked && !errors.As(got.err, &pe) || want != errPanicked && !errors.Is(got.err, want) {
			t.Errorf("first caller got error %v; want it to be %v", got.err, want)
		}
	}

	var stored []byte
	if row.stored != "" {
		stored = []byte(expand(row.stored))
	}
	r.stored(t, e.key, stored)

	res, err := e.b.Do(t.Context(), e.key, "fp", e.fn(value("retried")))
	if err != nil || string(res.Value) != expand(row.retry) || res.Replayed != (row.stored != "") {
		t.Errorf("retry on another Store got %+v, %v; want %q (replayed: %v)", res, err, expand(row.retry), row.stored != "")
	}
	if n := e.runs.Load(); n != row.runs {
		t.Errorf("the work ran %d times; want %d", n, row.runs)
	}
	if row.tx {
		// fn's ledger row committed exactly when what it completed did.
		want := 0
		if row.stored == charged {
			want = 1
		}
		var n int
		if err := e.ledger.db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+e.ledger.table+" WHERE id = ?", e.id).Scan(&n); err != nil {
			t.Fatal(err)
		} else if n != want {
			t.Errorf("the ledger holds %d rows of the key; want %d", n, want)
		}
	}
}

// outlivesLease makes the first call, in the atomic mode, with work that
// runs half a lease past its lease: nothing is renewed in the deciding
// tier (the open transaction is the lease), and a duplicate on another
// Store that does not wait still finds the key in flight.
func (e *endingEnv) outlivesLease(t *testing.T) answered {
	return e.call(t, t.Context(), e.fn(func(context.Context) ([]byte, error) {
		time.Sleep(e.lease * 3 / 2)
		if n := e.aLayer.Calls(faultlayer.Renew); n != 0 {
			return nil, fmt.Errorf("%d renewals in the deciding tier; want none", n)
		}
		impatient, _ := e.store(t, tiered.WithWait(0))
		if _, err := impatient.Do(t.Context(), e.key, "fp", e.fn(value("impatient"))); !errors.Is(err, idem.ErrInFlight) {
			return nil, fmt.Errorf("a duplicate past the lease got %v; want ErrInFlight", err)
		}
		return []byte("paid"), nil
	}))
}
