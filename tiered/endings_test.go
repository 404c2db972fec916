package tiered_test

import (
	"context"
	"errors"
	"fmt"
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

// ending is one way a function a Store runs can end, and what follows:
// what the first caller gets, what the deciding tier holds once the
// execution ended, what a retry on another Store gets, and how many times
// the work ran in all.
type ending struct {
	name string
	// tx says that fn completes its reservation in a SQL transaction of
	// its own: only where a SQL layer decides.
	tx bool
	// lease is the lease of the first caller's Store; 0 for the Store's
	// default.
	lease time.Duration
	// first makes the first call on e.a and returns its answer.
	first func(t *testing.T, e *endingEnv) answered

	// What the first caller gets: Result.Value, and an error that is
	// (errors.Is) each of errs — none for no error, errPanicked for a
	// *tiered.PanicError.
	value string
	errs  []error
	// stored is the result the deciding tier holds once the execution
	// ended; "" for no record (the claim released).
	stored string
	// What a retry gets: the stored result replayed, or (stored "") what
	// its own run returns, "retried".
	retry string
	// runs is how many times the work ran, the retry's included.
	runs int64

	// atomic is what follows in the atomic mode (tiered.WithAtomic), where
	// fn's transaction is the Store's own (sqllayer.TxFrom), which the
	// rows' transaction then is: sameAtomic when it is what is above.
	atomic atomicOutcome
}

// atomicOutcome is a row's first answer, record, retry and runs in the
// atomic mode; the fields mean what ending's do.
type atomicOutcome struct {
	same   bool // as in the other modes
	value  string
	errs   []error
	stored string
	retry  string
	runs   int64
}

// sameAtomic says that a row ends in the atomic mode as in the others.
var sameAtomic = atomicOutcome{same: true}

// refusedAtomic is the ending of a row whose fn completes its reservation
// itself in the atomic mode: the completion is refused (idem.ErrConfig),
// the Store's transaction rolls back, nothing is stored, the retry runs.
func refusedAtomic(value string) atomicOutcome {
	return atomicOutcome{value: value, errs: []error{idem.ErrConfig}, retry: "retried", runs: 2}
}

// inMode returns the row as it ends in the given mode.
func (row ending) inMode(atomic bool) ending {
	if !atomic || row.atomic.same {
		return row
	}
	a := row.atomic
	row.value, row.errs, row.stored, row.retry, row.runs = a.value, a.errs, a.stored, a.retry, a.runs
	return row
}

// errPanicked stands for a *tiered.PanicError in ending.errs.
var errPanicked = errors.New("a *tiered.PanicError")

var (
	errDeclined = errors.New("declined")
	errGone     = errors.New("client gone")
)

// endingEnv is what a row's first call works with: two Stores over one
// rig, the key, and the count of the work's runs.
type endingEnv struct {
	r      *rig
	a, b   *tiered.Store
	aLayer *faultlayer.Layer // a's deciding layer
	sql    *sqllayer.Layer   // a's own SQL layer, on SQL rigs: what completes a reservation
	ledger *ledger           // a business table, on SQL rigs
	atomic bool              // the Stores are made WithAtomic
	lease  time.Duration     // a's lease, when the row sets it
	key    idem.Key
	id     string // the key's ID, the ledger's row
	runs   atomic.Int64

	started, release chan struct{} // of held
}

// fn counts a run of body.
func (e *endingEnv) fn(body func(ctx context.Context) ([]byte, error)) tiered.Func {
	return func(ctx context.Context) ([]byte, error) {
		e.runs.Add(1)
		return body(ctx)
	}
}

// held counts a run of then, after it signals started and waits for
// release: the work is under way until the row lets it end.
func (e *endingEnv) held(then func(ctx context.Context) ([]byte, error)) tiered.Func {
	return e.fn(func(ctx context.Context) ([]byte, error) {
		close(e.started)
		<-e.release
		return then(ctx)
	})
}

// call calls a.Do with fn and waits for its answer.
func (e *endingEnv) call(t *testing.T, ctx context.Context, fn tiered.Func) answered {
	t.Helper()
	return within(t, doOn(ctx, e.a, e.key, fn), "the first caller's Do")
}

// inTx runs body in a transaction on the ledger's database, whose
// completion of the reservation writes val through a's SQL layer. In the
// atomic mode the transaction is the Store's (sqllayer.TxFrom), which
// commits or rolls back as fn ends: body's error is fn's.
func (e *endingEnv) inTx(ctx context.Context, db *bun.DB, body func(ctx context.Context, tx bun.IConn, complete func() error) error) error {
	res, ok := idem.ReservationFrom(ctx)
	if !ok {
		return errors.New("no reservation on the work's context")
	}
	val := []byte("charged " + e.id)
	if e.atomic {
		tx, ok := sqllayer.TxFrom(ctx)
		if !ok {
			return errors.New("no transaction on the atomic work's context")
		}
		if _, err := db.NewRaw("INSERT INTO "+e.ledger.table+" (id, amount) VALUES (?, ?)", e.id, 100).Conn(tx).Exec(ctx); err != nil {
			return err
		}
		return body(ctx, tx, func() error { return e.sql.CompleteReservation(ctx, tx, res, val) })
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+e.ledger.table+" (id, amount) VALUES (?, ?)", e.id, 100); err != nil {
			return err
		}
		return body(ctx, tx, func() error { return e.sql.CompleteReservation(ctx, tx, res, val) })
	})
}

// charged is what the rows whose transaction completes the reservation
// return and store.
const charged = "charged "

// The ways fn can end under Store.Do, each on every rig that supports it,
// with the four things that follow from it checked for each.
func TestStoreDoEndings(t *testing.T) {
	rows := []ending{
		{
			name:  "returns a value",
			first: func(t *testing.T, e *endingEnv) answered { return e.call(t, t.Context(), e.fn(value("paid"))) },
			value: "paid", stored: "paid", retry: "paid", runs: 1,
			atomic: sameAtomic,
		},
		{
			name:  "returns an error",
			first: func(t *testing.T, e *endingEnv) answered { return e.call(t, t.Context(), e.fn(fails("", errDeclined))) },
			errs:  []error{errDeclined}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name: "returns a value and an error",
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(fails("partial", errDeclined)))
			},
			value: "partial", errs: []error{errDeclined}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name: "panics",
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(context.Context) ([]byte, error) { panic("card processor exploded") }))
			},
			errs: []error{errPanicked}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name: "panics with the caller's ctx cancelled",
			first: func(t *testing.T, e *endingEnv) answered {
				return e.gaveUp(t, func(context.Context) ([]byte, error) { panic("card processor exploded") })
			},
			errs: []error{errGone}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name: "calls runtime.Goexit",
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(context.Context) ([]byte, error) {
					runtime.Goexit()
					return []byte("unreachable"), nil
				}))
			},
			errs: []error{tiered.ErrGoexit}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name:  "the caller's ctx cancelled while fn runs",
			first: func(t *testing.T, e *endingEnv) answered { return e.gaveUp(t, value("paid")) },
			errs:  []error{errGone}, stored: "paid", retry: "paid", runs: 1,
			atomic: sameAtomic,
		},
		{
			name: "runs longer than the lease", lease: 2 * time.Second,
			first: func(t *testing.T, e *endingEnv) answered {
				if e.atomic {
					return e.outlivesLease(t)
				}
				return e.call(t, t.Context(), e.fn(func(context.Context) ([]byte, error) {
					// Four renewals, one every lease/3: the work has outlived
					// its first lease.
					for deadline := time.Now().Add(15 * time.Second); e.aLayer.Calls(faultlayer.Renew) < 4; {
						if time.Now().After(deadline) {
							return nil, errors.New("the claim was not renewed")
						}
						time.Sleep(10 * time.Millisecond)
					}
					return []byte("paid"), nil
				}))
			},
			value: "paid", stored: "paid", retry: "paid", runs: 1,
			atomic: sameAtomic,
		},
		{
			name:  "a duplicate during it",
			first: func(t *testing.T, e *endingEnv) answered { return e.duplicated(t) },
			value: "paid", stored: "paid", retry: "paid", runs: 1,
			atomic: sameAtomic,
		},
		{
			name: "a reservation rolled back before completing", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					return nil, e.inTx(ctx, e.ledger.db, func(context.Context, bun.IConn, func() error) error { return errDeclined })
				}))
			},
			errs: []error{errDeclined}, retry: "retried", runs: 2,
			atomic: sameAtomic,
		},
		{
			name: "a reservation rolled back after completing", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					return []byte(charged + e.id), e.inTx(ctx, e.ledger.db, func(_ context.Context, _ bun.IConn, complete func() error) error {
						if err := complete(); err != nil {
							return err
						}
						return errDeclined
					})
				}))
			},
			value: charged, errs: []error{tiered.ErrNotCommitted, errDeclined}, retry: "retried", runs: 2,
			atomic: refusedAtomic(charged),
		},
		{
			name: "a reservation completed and committed", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					return []byte(charged + e.id), e.inTx(ctx, e.ledger.db, func(_ context.Context, _ bun.IConn, complete func() error) error { return complete() })
				}))
			},
			value: charged, stored: charged, retry: charged, runs: 1,
			atomic: refusedAtomic(charged),
		},
		{
			name: "a reservation completed whose COMMIT fails", tx: true,
			first: func(t *testing.T, e *endingEnv) answered { return e.commitFails(t) },
			value: charged, errs: []error{tiered.ErrNotCommitted}, retry: "retried", runs: 2,
			atomic: atomicOutcome{value: charged, errs: []error{tiered.ErrNotCommitted}, retry: "retried", runs: 2},
		},
		{
			name: "a reservation never completed", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					if _, ok := idem.ReservationFrom(ctx); !ok {
						return nil, errors.New("no reservation on the work's context")
					}
					return []byte("paid"), nil // the Store completes the key itself
				}))
			},
			value: "paid", stored: "paid", retry: "paid", runs: 1,
			atomic: sameAtomic,
		},
		{
			name: "a reservation completed twice with the same bytes", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					return []byte(charged + e.id), e.inTx(ctx, e.ledger.db, func(_ context.Context, _ bun.IConn, complete func() error) error {
						if err := complete(); err != nil {
							return err
						}
						return complete()
					})
				}))
			},
			value: charged, stored: charged, retry: charged, runs: 1,
			atomic: refusedAtomic(charged),
		},
		{
			// A second completion with other bytes is refused at the call;
			// fn commits anyway, and every caller gets the first.
			name: "a reservation completed again with other bytes", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					res, _ := idem.ReservationFrom(ctx)
					var second error
					err := e.inTx(ctx, e.ledger.db, func(ctx context.Context, tx bun.IConn, complete func() error) error {
						if err := complete(); err != nil {
							return err
						}
						second = e.sql.CompleteReservation(ctx, tx, res, []byte("other bytes"))
						return nil
					})
					if err == nil && !errors.Is(second, idem.ErrConfig) {
						err = fmt.Errorf("the second completion, with other bytes: %v, want idem.ErrConfig", second)
					}
					return []byte(charged + e.id), err
				}))
			},
			value: charged, stored: charged, retry: charged, runs: 1,
			atomic: refusedAtomic(charged),
		},
		{
			// fn returns other bytes than it completed: what committed is
			// the answer, the first caller's included.
			name: "a reservation completed, then other bytes returned", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					err := e.inTx(ctx, e.ledger.db, func(_ context.Context, _ bun.IConn, complete func() error) error { return complete() })
					return []byte("other bytes"), err
				}))
			},
			value: charged, stored: charged, retry: charged, runs: 1,
			atomic: refusedAtomic("other bytes"),
		},
		{
			name: "a panic after the reservation committed", tx: true,
			first: func(t *testing.T, e *endingEnv) answered {
				return e.call(t, t.Context(), e.fn(func(ctx context.Context) ([]byte, error) {
					if err := e.inTx(ctx, e.ledger.db, func(_ context.Context, _ bun.IConn, complete func() error) error { return complete() }); err != nil {
						return nil, err
					}
					panic("after the commit")
				}))
			},
			value: charged, stored: charged, retry: charged, runs: 1,
			atomic: refusedAtomic(""),
		},
	}
	for _, row := range rows {
		if !row.atomic.same && row.atomic.runs == 0 {
			t.Fatalf("%s: the row states no atomic outcome", row.name)
		}
	}
	eachRig(t, func(t *testing.T, r *rig) {
		for _, row := range rows {
			if row.tx && !r.sqlDecides() {
				continue // no SQL transaction to complete in
			}
			t.Run(row.name, func(t *testing.T) { row.check(t, r, false) })
		}
	})
	// The atomic mode, where a SQL layer decides: each row ends as its
	// atomic outcome says.
	t.Run("atomic", func(t *testing.T) {
		eachSQLRig(t, func(t *testing.T, r *rig) {
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) { row.inMode(true).check(t, r, true) })
			}
		})
	})
}
