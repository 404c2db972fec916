package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// ledger is a business table beside idem's, on a stack's database: a
// charge row per key, which a function writes in the transaction that
// completes its reservation.
type ledger struct {
	st    *stacktest.Stack
	db    *bun.DB
	table string
	runs  atomic.Int64
}

func newLedger(t *testing.T, st *stacktest.Stack) *ledger {
	t.Helper()
	l := &ledger{st: st, db: st.DB(t), table: testenv.Name("charges")}
	ctx := t.Context()
	if _, err := l.db.ExecContext(ctx, "CREATE TABLE "+l.table+" (id VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := l.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+l.table); err != nil {
			t.Errorf("drop %s: %v", l.table, err)
		}
	})
	return l
}

// layer returns a SQL layer of its own on the stack's tables.
func (l *ledger) layer(t *testing.T) *sqllayer.Layer {
	t.Helper()
	return must.Get(sqllayer.New(l.st.DB(t), sqllayer.WithRecordsTable(l.st.Records),
		sqllayer.WithEventsTable(l.st.Events), sqllayer.WithVersionsTable(l.st.Versions)))(t)
}

// store returns a Store over the stack's Redis and sql (or a fault layer
// over it), closed when the test ends.
func (l *ledger) store(t *testing.T, sql idem.Layer, opts ...tiered.Option) *tiered.Store {
	t.Helper()
	base := []tiered.Option{tiered.WithRedis(l.st.RedisLayer(t)), tiered.WithSQL(sql), tiered.WithTimeouts(2*time.Second, 10*time.Second)}
	return newStore(t, append(base, opts...)...)
}

// charges counts the charge rows of id.
func (l *ledger) charges(t *testing.T, id string) int64 {
	t.Helper()
	n, err := l.db.NewSelect().Table(l.table).Where("id = ?", id).Count(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return int64(n) // int before bun 1.3, int64 since
}

// charge is a Func that records a charge for id and completes its
// reservation with "charged <id>" in one transaction through sql. fail,
// when non-nil, is returned from the transaction after the completion, so
// that it rolls back. after runs once the transaction ended.
func (l *ledger) charge(sql *sqllayer.Layer, id string, fail error, after func(ctx context.Context)) tiered.Func {
	return func(ctx context.Context) ([]byte, error) {
		l.runs.Add(1)
		res, ok := idem.ReservationFrom(ctx)
		if !ok {
			return nil, errors.New("no reservation on the work's context")
		}
		val := []byte("charged " + id)
		err := l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+l.table+" (id, amount) VALUES (?, ?)", id, 100); err != nil {
				return err
			}
			if err := sql.CompleteReservation(ctx, tx, res, val); err != nil {
				return err
			}
			return fail
		})
		if after != nil {
			after(ctx)
		}
		return val, err
	}
}

// The handler commits its charge and idem's completion together; its
// Store goes away right after the commit, before anyone hears of it (the
// process killed between the commit and the response). The retry on
// another instance replays the committed result: the work never runs
// again and the charge exists once.
func TestReservationCommitThenStoreGone(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		sqlA := lg.layer(t)
		a := lg.store(t, sqlA)
		b := lg.store(t, lg.layer(t), tiered.WithLocalCache(0, 0, 0))
		k, id := newKey(t), "ch-gone"
		_, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, nil, func(ctx context.Context) {
			go func() { _ = a.Close() }() // the instance dies after the commit
			<-ctx.Done()
		}))
		if !errors.Is(err, idem.ErrClosed) {
			t.Fatalf("the instance that died: %v, want ErrClosed", err)
		}
		for range 3 {
			r, err := b.Do(t.Context(), k, "fp", lg.charge(lg.layer(t), id, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Replayed || string(r.Value) != "charged "+id {
				t.Fatalf("retry: %+v, want the committed result replayed", r)
			}
		}
		if n := lg.runs.Load(); n != 1 {
			t.Fatalf("the work ran %d times, want 1", n)
		}
		if n := lg.charges(t, id); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

// A commit heard by the Store: the caller gets the committed result, which
// the Store hands on to Redis and its local cache as for its own
// completion.
func TestReservationCommitPublishes(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		sqlA := lg.layer(t)
		obs := newRecorder()
		a := lg.store(t, sqlA, tiered.WithObserver(obs))
		k, id := newKey(t), "ch-ok"
		r, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, nil, nil))
		if err != nil || r.Replayed || string(r.Value) != "charged "+id {
			t.Fatalf("first call: %+v, %v", r, err)
		}
		if n := obs.count("completed/sql"); n != 1 {
			t.Fatalf("%d completions heard, want 1", n)
		}
		if r, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, nil, nil)); err != nil || r.Tier != idem.TierLocal {
			t.Fatalf("same instance: %+v, %v; want a local replay", r, err)
		}
		// The result reaches Redis off the first call's critical path, once
		// SQL holds it.
		redis := lg.st.RedisLayer(t)
		eventually(t, func() error {
			if rec, err := redis.Get(t.Context(), k); err != nil || !rec.Completed() || string(rec.Result) != "charged "+id {
				return fmt.Errorf("redis holds %+v, %v; want the committed result", rec, err)
			}
			return nil
		})
		c := lg.store(t, lg.layer(t), tiered.WithLocalCache(0, 0, 0))
		if r, err := c.Do(t.Context(), k, "fp", lg.charge(lg.layer(t), id, nil, nil)); err != nil || r.Tier != idem.TierRedis || string(r.Value) != "charged "+id {
			t.Fatalf("other instance: %+v, %v; want a Redis replay", r, err)
		}
		if n := lg.runs.Load(); n != 1 {
			t.Fatalf("the work ran %d times, want 1", n)
		}
	})
}

// The handler's transaction rolls back after the completion: nothing is
// stored, the key is released, and the retry (on another instance) runs
// and commits once.
func TestReservationRollbackRunsAgain(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		sqlA, sqlB := lg.layer(t), lg.layer(t)
		a, b := lg.store(t, sqlA), lg.store(t, sqlB)
		k, id := newKey(t), "ch-rollback"
		boom := errors.New("the ledger refused")
		r, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, boom, nil))
		if !errors.Is(err, tiered.ErrNotCommitted) || !errors.Is(err, boom) {
			t.Fatalf("rolled back: %v, want ErrNotCommitted wrapping the function's error", err)
		}
		if string(r.Value) != "charged "+id {
			t.Fatalf("the leader's value: %q", r.Value)
		}
		if n := lg.charges(t, id); n != 0 {
			t.Fatalf("%d charges after the rollback, want 0", n)
		}
		r, err = b.Do(t.Context(), k, "fp", lg.charge(sqlB, id, nil, nil))
		if err != nil || r.Replayed {
			t.Fatalf("retry: %+v, %v; want a new run", r, err)
		}
		if r, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, nil, nil)); err != nil || !r.Replayed {
			t.Fatalf("after the commit: %+v, %v; want a replay", r, err)
		}
		if n := lg.runs.Load(); n != 2 {
			t.Fatalf("the work ran %d times, want 2", n)
		}
		if n := lg.charges(t, id); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

// A function that returns without committing its completion (an error
// before the transaction committed is the usual way) leaves no record: a
// function that ignores the error and returns success does not make the
// Store store the result the transaction lost.
func TestReservationRollbackIgnoredByFunction(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		sqlA := lg.layer(t)
		a := lg.store(t, sqlA)
		k, id := newKey(t), "ch-ignored"
		fn := lg.charge(sqlA, id, errors.New("rolled back"), nil)
		_, err := a.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
			val, _ := fn(ctx) // the error ignored
			return val, nil
		})
		if !errors.Is(err, tiered.ErrNotCommitted) {
			t.Fatalf("%v, want ErrNotCommitted", err)
		}
		if _, err := sqlA.Get(t.Context(), k); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("the record after the rollback: %v, want it released", err)
		}
	})
}

// Several instances, concurrent duplicates: one execution, one charge,
// every caller the committed bytes.
func TestReservationBurstOverInstances(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		lg := newLedger(t, st)
		layers := []*sqllayer.Layer{lg.layer(t), lg.layer(t), lg.layer(t)}
		stores := []*tiered.Store{lg.store(t, layers[0]), lg.store(t, layers[1]), lg.store(t, layers[2])}
		for round := range 5 {
			k, id := newKey(t), fmt.Sprintf("ch-burst-%d", round)
			var wg sync.WaitGroup
			start := make(chan struct{})
			vals, errs := make([][]byte, 12), make([]error, 12)
			for i := range 12 {
				wg.Go(func() {
					<-start
					r, err := stores[i%3].Do(t.Context(), k, "fp", lg.charge(layers[i%3], id, nil, nil))
					vals[i], errs[i] = r.Value, err
				})
			}
			close(start)
			wg.Wait()
			for i := range errs {
				if errs[i] != nil {
					t.Fatalf("round %d caller %d: %v", round, i, errs[i])
				}
				if !bytes.Equal(vals[i], []byte("charged "+id)) {
					t.Fatalf("round %d caller %d got %q", round, i, vals[i])
				}
			}
			if n := lg.charges(t, id); n != 1 {
				t.Fatalf("round %d: %d charges, want 1", round, n)
			}
		}
		if n := lg.runs.Load(); n != 5 {
			t.Fatalf("the work ran %d times in 5 rounds, want 5", n)
		}
	})
}

// The transaction committed, but SQL cannot be read once the function
// returned: the Store cannot tell what committed, so it answers ErrPending,
// never runs the work again, and reads again in the background; a retry
// meanwhile finds the committed record.
func TestReservationCommitUnverifiedIsPending(t *testing.T) {
	st := stacktest.Real(t)
	lg := newLedger(t, st)
	sqlA := lg.layer(t)
	fl := faultlayer.New(sqlA)
	a := lg.store(t, fl, tiered.WithLease(600*time.Millisecond))
	k, id := newKey(t), "ch-pending"
	_, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, nil, func(context.Context) {
		fl.Fail(fmt.Errorf("%w: injected", idem.ErrUnavailable), faultlayer.Get)
	}))
	if !errors.Is(err, tiered.ErrPending) {
		t.Fatalf("%v, want ErrPending", err)
	}
	b := lg.store(t, lg.layer(t))
	if r, err := b.Do(t.Context(), k, "fp", lg.charge(lg.layer(t), id, nil, nil)); err != nil || !r.Replayed || string(r.Value) != "charged "+id {
		t.Fatalf("retry: %+v, %v; want the committed result", r, err)
	}
	fl.Up()
	if n := lg.runs.Load(); n != 1 {
		t.Fatalf("the work ran %d times, want 1", n)
	}
	if n := lg.charges(t, id); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

// The transaction rolled back, and SQL cannot be read once the function
// returned: the Store holds the lease (no one runs the work meanwhile)
// until it can read, then releases the key, and the retry runs once.
func TestReservationRollbackUnverifiedHoldsLease(t *testing.T) {
	st := stacktest.Real(t)
	lg := newLedger(t, st)
	sqlA := lg.layer(t)
	fl := faultlayer.New(sqlA)
	// Long enough that the holder's renewals keep up on a loaded machine.
	const lease = 2 * time.Second
	a := lg.store(t, fl, tiered.WithLease(lease))
	k, id := newKey(t), "ch-held"
	_, err := a.Do(t.Context(), k, "fp", lg.charge(sqlA, id, errors.New("rolled back"), func(context.Context) {
		fl.Fail(fmt.Errorf("%w: injected", idem.ErrUnavailable), faultlayer.Get)
	}))
	if !errors.Is(err, tiered.ErrPending) {
		t.Fatalf("%v, want ErrPending", err)
	}
	sqlB := lg.layer(t)
	b := lg.store(t, sqlB, tiered.WithLease(lease), tiered.WithWait(0))
	// Past the lease and its grace: the holder's renewals keep the claim.
	for range 4 {
		if _, err := b.Do(t.Context(), k, "fp", lg.charge(sqlB, id, nil, nil)); !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("while the holder cannot read: %v, want ErrInFlight", err)
		}
		time.Sleep(lease / 2)
	}
	fl.Up()
	var r tiered.Result
	for range 100 {
		if r, err = b.Do(t.Context(), k, "fp", lg.charge(sqlB, id, nil, nil)); !errors.Is(err, idem.ErrInFlight) {
			break
		}
		time.Sleep(lease / 10)
	}
	if err != nil || r.Replayed {
		t.Fatalf("retry once the holder read: %+v, %v; want a new run", r, err)
	}
	if n := lg.runs.Load(); n != 2 {
		t.Fatalf("the work ran %d times, want 2", n)
	}
	if n := lg.charges(t, id); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}
