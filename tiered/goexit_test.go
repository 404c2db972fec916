package tiered_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// goexitLease is the lease of the Store whose work calls Goexit: short, so
// that a renewal comes soon (every lease/3), and long enough for each claim
// and renewal to reach servers shared with other tests, and a loaded
// machine, in time.
const goexitLease = 3 * time.Second

// callerCtx returns the context of a caller of Do: one that can be
// cancelled (Do then runs the execution on a goroutine of its own) or one
// that cannot (Do runs it on the caller's goroutine).
func callerCtx(t *testing.T, cancellable bool) context.Context {
	if !cancellable {
		return context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func callerName(cancellable bool) string {
	if cancellable {
		return "cancellable caller"
	}
	return "uncancellable caller"
}

// A function that calls runtime.Goexit (t.FailNow in a function under test,
// or a library that calls it) neither returns nor panics. Its execution
// still ends, whichever goroutine runs it: renewal stops, the key is
// released in every tier and forgotten by the table of calls in flight, a
// duplicate waiting in this process hears ErrGoexit, the observer hears
// EventReleased, and a retry on this Store or another runs the work. The
// goroutine that ran fn still exits: a caller whose context cannot be
// cancelled ran fn itself, so its Do does not return; one whose context
// can gets ErrGoexit.
func TestGoexitEndsTheExecution(t *testing.T) {
	eachRig(t, func(t *testing.T, r *rig) {
		for _, cancellable := range []bool{true, false} {
			t.Run(callerName(cancellable), func(t *testing.T) { goexitEnds(t, r, cancellable) })
		}
	})
}

func goexitEnds(t *testing.T, r *rig, cancellable bool) {
	rec := newRecorder()
	a, decides := r.store(t, tiered.WithLease(goexitLease), tiered.WithWait(3*time.Second), tiered.WithObserver(rec))
	b, _ := r.store(t, tiered.WithWait(3*time.Second))
	k := newKey(t)
	renewed := make(chan struct{}, 1)
	decides.Hook(faultlayer.Renew, func(context.Context) error {
		select {
		case renewed <- struct{}{}:
		default:
		}
		return nil
	})
	var runs atomic.Int64
	started := make(chan struct{})
	dupCtx := newJoinSignal(context.Background())
	fn := func(context.Context) ([]byte, error) {
		runs.Add(1)
		close(started)
		// Hold the execution until its claim was renewed and a duplicate
		// in this process waits for it.
		for _, ch := range []<-chan struct{}{renewed, dupCtx.joined} {
			select {
			case <-ch:
			case <-time.After(15 * time.Second):
				t.Error("the execution was never renewed, or the duplicate never joined it")
			}
		}
		runtime.Goexit()
		return []byte("unreachable"), nil
	}
	leader := doOn(callerCtx(t, cancellable), a, k, fn)
	within(t, started, "fn to start")
	dup := doOn(dupCtx, a, k, func(context.Context) ([]byte, error) {
		runs.Add(1)
		return []byte("the duplicate ran"), nil
	})

	got := within(t, leader, "the leader's Do")
	switch {
	case cancellable && (!got.returned || !errors.Is(got.err, tiered.ErrGoexit)):
		t.Fatalf("leader: %v; want ErrGoexit", got)
	case !cancellable && got.returned:
		t.Fatalf("leader: Do returned %v on the goroutine that called Goexit; want the goroutine to exit", got)
	}
	d := within(t, dup, "the duplicate's Do")
	if !d.returned || !errors.Is(d.err, tiered.ErrGoexit) || d.res.Value != nil {
		t.Fatalf("duplicate: %v; want ErrGoexit", d)
	}
	if rec.count("released") != 1 {
		t.Fatalf("events %v; want one released", rec.counts)
	}
	// Renewal stopped before the callers heard: nothing renews the key
	// after them, however long one waits (here a whole lease, three
	// renewals' worth).
	n := r.renewals()
	time.Sleep(goexitLease)
	if m := r.renewals(); m != n {
		t.Fatalf("%d renewals after the execution ended", m-n)
	}
	r.stored(t, k, nil)

	declined := errors.New("declined")
	if _, err := a.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
		runs.Add(1)
		return nil, declined
	}); !errors.Is(err, declined) {
		t.Fatalf("retry on the same Store: %v; want fn to run again (and decline)", err)
	}
	res, err := b.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
		runs.Add(1)
		return []byte("paid"), nil
	})
	if err != nil || res.Replayed || string(res.Value) != "paid" {
		t.Fatalf("retry on another Store: %+v, %v; want fn to run again", res, err)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("fn ran %d times; want 3 (the Goexit, two retries)", n)
	}
}

// A function that completed its reservation in a transaction that
// committed has done its work: whatever it does next (panics, calls
// runtime.Goexit), the committed result stands, every caller gets it with
// no error, and a retry on another Store replays it. One that calls Goexit
// inside its transaction committed nothing (the transaction rolls back as
// the goroutine unwinds): the key is released and a retry runs the work.
func TestWorkEndingAfterItsTransaction(t *testing.T) {
	eachSQLRig(t, func(t *testing.T, r *rig) {
		rows := []struct {
			name        string
			cancellable bool
			after       func() // what fn does once its transaction ended
			inTx        bool   // after runs inside the transaction, before it commits
			committed   bool   // the completion committed
			exits       bool   // the caller's goroutine ran fn and exits with it
			err         error  // what the caller gets, when it did not commit
		}{
			{name: "goexit after commit, cancellable caller", cancellable: true, after: runtime.Goexit, committed: true},
			{name: "goexit after commit, uncancellable caller", after: runtime.Goexit, committed: true, exits: true},
			{name: "panic after commit", cancellable: true, after: func() { panic("after the commit") }, committed: true},
			{name: "panic after commit, uncancellable caller", after: func() { panic("after the commit") }, committed: true},
			{name: "goexit inside the transaction", cancellable: true, after: runtime.Goexit, inTx: true, err: tiered.ErrGoexit},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				l := newLedger(t, r.st)
				a, decides := r.store(t)
				b, _ := r.store(t)
				sql := decides.Inner.(*sqllayer.Layer)
				k := newKey(t)
				id := k.String()
				val := []byte("charged " + id)
				fn := func(ctx context.Context) ([]byte, error) {
					l.runs.Add(1)
					res, _ := idem.ReservationFrom(ctx)
					err := l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
						if _, err := tx.ExecContext(ctx, "INSERT INTO "+l.table+" (id, amount) VALUES (?, ?)", id, 100); err != nil {
							return err
						}
						if err := sql.CompleteReservation(ctx, tx, res, val); err != nil {
							return err
						}
						if row.inTx {
							row.after()
						}
						return nil
					})
					if err != nil {
						return nil, err
					}
					row.after()
					return []byte("unreachable"), nil
				}
				got := within(t, doOn(callerCtx(t, row.cancellable), a, k, fn), "the caller's Do")
				switch {
				case row.exits && got.returned:
					t.Fatalf("Do returned %v on the goroutine that called Goexit", got)
				case row.exits:
				case row.committed && (got.err != nil || string(got.res.Value) != string(val)):
					t.Fatalf("caller: %v; want the committed value, no error", got)
				case !row.committed && (!errors.Is(got.err, row.err) || !errors.Is(got.err, tiered.ErrNotCommitted)):
					t.Fatalf("caller: %v; want ErrNotCommitted wrapping %v", got, row.err)
				}
				want, charges := []byte(nil), int64(0)
				if row.committed {
					want, charges = val, 1
				}
				r.stored(t, k, want)
				if n := l.charges(t, id); n != charges {
					t.Fatalf("%d charges; want %d", n, charges)
				}
				res, err := b.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) {
					l.runs.Add(1)
					return []byte("retried"), nil
				})
				switch {
				case row.committed && (err != nil || !res.Replayed || string(res.Value) != string(val) || l.runs.Load() != 1):
					t.Fatalf("retry: %+v, %v, runs %d; want a replay of the committed value", res, err, l.runs.Load())
				case !row.committed && (err != nil || res.Replayed || string(res.Value) != "retried" || l.runs.Load() != 2):
					t.Fatalf("retry: %+v, %v, runs %d; want the work to run again", res, err, l.runs.Load())
				}
			})
		}
	})
}

// A call whose goroutine exits inside Do (fn called runtime.Goexit and the
// caller's context cannot be cancelled, so fn ran there) still ends its
// trace, as failed; so does the call whose fn ran elsewhere.
func TestGoexitEndsTheTrace(t *testing.T) {
	for _, cancellable := range []bool{true, false} {
		t.Run(callerName(cancellable), func(t *testing.T) {
			tr := newTracer()
			s := newStore(t, tiered.WithSQL(newMem(t)), tiered.WithObserver(tr))
			got := within(t, doOn(callerCtx(t, cancellable), s, newKey(t), func(context.Context) ([]byte, error) {
				runtime.Goexit()
				return []byte("unreachable"), nil
			}), "the caller's Do")
			if got.returned != cancellable {
				t.Fatalf("caller: %v", got)
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.started != 1 || tr.open != 0 || tr.outcomes[idem.OutcomeFailed] != 1 {
				t.Fatalf("calls started %d, open %d, outcomes %v; want one, ended as failed", tr.started, tr.open, tr.outcomes)
			}
		})
	}
}
