package tiered

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
)

// The atomic mode (WithAtomic). The deciding layer opens a transaction,
// inserts the claim row in it and runs fn with the transaction in its
// context (sqllayer.TxFrom); when fn returns, the Store writes the
// completion in the same transaction and the layer commits: one COMMIT
// holds fn's rows, the claim and the result. The open transaction is the
// lease: nothing is renewed in the deciding tier, and nothing of the
// execution is visible to anyone before the commit.
//
//   - fn fails, panics, calls runtime.Goexit, or its connection is cut
//     before the commit: the transaction rolls back; no claim is left, and
//     a retry runs at once, with no lease to wait out.
//   - A duplicate on another instance while the transaction is open: Redis
//     answers it as in the other modes where it holds the result; else its
//     claim waits on the unique index for the owner's transaction, at most
//     the Store's wait (the database's lock timeout), then replays the
//     committed result, or runs (the owner rolled back), or gets
//     idem.ErrInFlight (on SQLite, unless an execution of this process
//     holds the key, idem.ErrUnavailable after the wait and the SQL
//     timeout: the one writer's lock does not say whose key it holds).
//     No polling. A standard-mode duplicate (a Store of the
//     other mode on the table) waits likewise, bounded by its own wait,
//     and replays (askSQL).
//   - The commit's outcome unknown (the connection lost during COMMIT): the
//     Store reads the record back before anyone is answered, as for a
//     completion in fn's own transaction.

// AtomicLayer is the optional interface of a deciding layer that can run an
// execution in one transaction of its database: *sqllayer.Layer implements
// it, and WithAtomic needs it. The Store calls RunAtomic with its lease, its
// retention, what is left of its wait, and its SQL timeout (see
// sqllayer.Layer.RunAtomic for the contract).
type AtomicLayer interface {
	idem.Layer
	RunAtomic(ctx context.Context, key idem.Key, fingerprint string, lease, ttl, wait, timeout time.Duration,
		work func(ctx context.Context, rec idem.Record, complete func(result []byte) error) error) (idem.Record, bool, error)
}

// WithAtomic makes every execution atomic with fn's own rows when on: the
// deciding tier (WithSQL, a layer that implements AtomicLayer, such as
// *sqllayer.Layer) claims the key inside a transaction, fn runs with that
// transaction in its context (sqllayer.TxFrom) and writes its rows there,
// and the completion commits with them in one COMMIT. Default off.
//
// Choose it when fn's effects are rows in the same database: a first
// execution then costs the commit fn needs anyway, and a failure leaves
// neither rows nor a claim behind. Not for fn that calls slow external
// services: the transaction, its row lock and a connection of the pool are
// held for fn's whole length, and duplicates wait on them.
//
// It needs WithSQL with an AtomicLayer, and cannot be combined with
// WithFailOpen (fn cannot run without the transaction). In this mode fn
// does not complete its reservation itself (sqllayer's CompleteReservation
// refuses, and the execution keeps nothing); the reservation still gives
// its key and token.
func WithAtomic(on bool) Option {
	return func(c *config) error {
		c.atomic = on
		return nil
	}
}

// Atomic reports whether the Store runs its executions in the atomic mode
// (WithAtomic): an adapter then lets nothing of an execution's answer
// leave before the commit (the HTTP middleware holds a flushed response
// whole, for one).
func (s *Store) Atomic() bool { return s.cfg.atomic }

// validateAtomic checks the options WithAtomic depends on, once every
// option is applied.
func (c *config) validateAtomic() error {
	if !c.atomic {
		return nil
	}
	switch l, ok := c.sql.(AtomicLayer); {
	case c.sql == nil:
		return errors.New("WithAtomic needs WithSQL: the transaction is the SQL tier's")
	case !ok:
		return fmt.Errorf("WithAtomic needs a SQL tier that runs executions in a transaction (tiered.AtomicLayer, as *sqllayer.Layer); %T does not", c.sql)
	case c.failOpen:
		return errors.New("WithAtomic cannot be combined with WithFailOpen: the work runs in the SQL tier's transaction, never without it")
	default:
		c.atomicLayer = l
	}
	return nil
}

// atomicRun is what one atomic execution's work did, as its settlement
// needs it.
type atomicRun struct {
	ran       bool      // work began: the key was claimed
	returned  bool      // fn returned (else it called runtime.Goexit)
	val       []byte    // fn's value
	fnErr     error     // fn's error
	refused   error     // fn completed its reservation itself (refused)
	stored    []byte    // the result completed in the transaction
	sent      time.Time // when the completion was sent
	began     time.Time // when fn began
	asked     bool      // the work asked for the commit
	completed error     // the completion's error, when it failed
}

// executeAtomic decides who runs fn in atomic mode, and runs it there.
func (c *call) executeAtomic() outcome {
	if o, done := c.askRedis(nil); done {
		return o
	}
	s := c.s
	// The transaction lives in the work's context: Close cancels it, which
	// rolls the transaction back, through the table of calls in flight.
	workCtx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	c.s.flights.setWork(c, cancel)
	if s.closed.Load() {
		cancel(idem.ErrClosed)
	}
	waited := false
	for pause := s.cfg.pollMin; ; pause = min(2*pause, s.cfg.pollMax) {
		var st atomicRun
		sent := time.Now()
		rec, claimed, err := c.runAtomic(workCtx, &st)
		if st.ran {
			return c.settleAtomic(&st, rec, err)
		}
		switch {
		case errors.Is(err, idem.ErrInFlight):
			c.releaseRedis()
			c.observe(idem.EventInFlight, idem.TierSQL, time.Since(c.start), nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrInFlight}
		case err != nil || claimed:
			c.releaseRedis()
			if s.stopped(c.ctx) || errors.Is(context.Cause(workCtx), idem.ErrClosed) {
				return outcome{err: idem.ErrClosed}
			}
			if err == nil { // claimed, yet work did not run: the layer broke its contract
				err = errors.New("tiered: the atomic layer claimed the key without running the work")
			}
			c.observe(idem.EventTierError, idem.TierSQL, 0, err)
			if errors.Is(err, idem.ErrConfig) {
				s.misconfigured(c.ctx, idem.TierSQL, err)
				return outcome{err: err}
			}
			if !errors.Is(err, idem.ErrUnavailable) {
				err = fmt.Errorf("%w: sql: %w", idem.ErrUnavailable, err)
			}
			return outcome{err: err}
		case rec.Fingerprint != c.fp():
			c.releaseRedis()
			c.observe(idem.EventMismatch, idem.TierSQL, 0, nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrMismatch}
		case rec.Completed():
			c.backfill(rec, sent)
			return c.replay(rec, idem.TierSQL, sent, waited)
		}
		// In progress under a claim committed outside an atomic execution
		// (a Store of another mode on the same table): wait for it as
		// askSQL does, then claim again.
		if !time.Now().Add(pause).Before(c.deadline()) {
			c.releaseRedis()
			c.observe(idem.EventInFlight, idem.TierSQL, time.Since(c.start), nil)
			return outcome{result: Result{Tier: idem.TierSQL}, err: idem.ErrInFlight}
		}
		waited = true
		asked := time.Now()
		if rec, ok := c.awaitSignal(pause); ok && rec.Fingerprint == c.fp() {
			c.releaseRedis()
			return c.replay(rec, idem.TierRedis, asked, true)
		}
		if s.stopped(c.ctx) {
			c.releaseRedis()
			return outcome{err: idem.ErrClosed}
		}
	}
}

// runAtomic makes one attempt through the layer: claim, and when claimed
// run fn and complete, in one transaction. When fn calls runtime.Goexit the
// layer has rolled back by the time the deferred function here runs; it
// sets the outcome for whoever waits, as work does.
func (c *call) runAtomic(ctx context.Context, st *atomicRun) (rec idem.Record, claimed bool, err error) {
	s := c.s
	defer func() {
		if st.ran && !st.returned {
			st.fnErr = ErrGoexit
			c.out = c.settleAtomic(st, idem.Record{}, ErrGoexit)
		}
	}()
	wait := max(time.Until(c.deadline()), 0)
	return s.cfg.atomicLayer.RunAtomic(ctx, c.key, c.fp(), s.cfg.lease, s.cfg.retention, wait, s.cfg.sqlTimeout,
		func(txCtx context.Context, rec idem.Record, complete func(result []byte) error) error {
			st.ran = true
			return c.workAtomic(txCtx, rec, complete, st)
		})
}

// workAtomic runs fn in the claimed transaction and writes the completion
// there; its error rolls the transaction back.
func (c *call) workAtomic(txCtx context.Context, rec idem.Record, complete func(result []byte) error, st *atomicRun) error {
	s := c.s
	c.sqlToken, c.sqlTookOver = rec.Token, rec.TookOver
	c.observe(idem.EventClaimed, idem.TierSQL, 0, nil)
	rec.Fingerprint = c.fp()
	fnCtx, owner := reservation.NewContext(txCtx, s.sql, rec, s.cfg.retention)
	st.began = c.now()
	val, err := runFn(fnCtx, c.fn)
	st.returned = true
	st.val, st.fnErr = val, err
	if ending := owner.End(); ending.Refused != nil {
		st.refused = ending.Refused
		return ending.Refused
	}
	if err != nil {
		return err
	}
	st.stored = val
	st.sent = c.now()
	err = complete(st.stored)
	if errors.Is(err, idem.ErrTooLarge) {
		// The work ran once; its result cannot be kept. Complete with the
		// marker that says so, so that retries never run it again.
		st.stored = tooLargeMarker
		err = complete(st.stored)
	}
	if err != nil {
		st.completed = err
		return err
	}
	st.asked = true
	return nil
}

// settleAtomic ends an atomic execution: err is RunAtomic's answer once
// fn ran (rec the completed record when it committed).
func (c *call) settleAtomic(st *atomicRun, rec idem.Record, err error) outcome {
	s := c.s
	took := c.now().Sub(st.began)
	switch {
	case err == nil:
		return c.committed(st, took)
	case st.asked && !errors.Is(err, idem.ErrConfig):
		// The commit failed: its outcome may be unknown. Read the record
		// back before answering anyone.
		return c.verifyAtomic(st, err, took)
	}
	// Rolled back: nothing is stored, the key is free.
	c.releaseRedis()
	switch {
	case st.refused != nil:
		err = st.refused
	case st.fnErr != nil:
		err = st.fnErr
	case s.stopped(c.ctx) && !errors.Is(err, idem.ErrConfig):
		err = idem.ErrClosed
	}
	c.observe(idem.EventReleased, idem.TierSQL, took, err)
	return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}, err: err}
}

// committed hands a result that committed on to Redis and the local cache,
// and answers with it.
func (c *call) committed(st *atomicRun, took time.Duration) outcome {
	s := c.s
	// The completion set the record's expiry from the database's clock
	// after it was sent: it lives at least the retention from then.
	lives := st.sent.Add(s.cfg.retention)
	c.observe(idem.EventCompleted, idem.TierSQL, 0, nil)
	c.publishLater(st.stored, lives)
	s.cache.put(c.key, c.fp(), st.stored, lives, st.sent)
	c.observe(idem.EventNew, idem.TierSQL, took, nil)
	if isTooLargeMarker(st.stored) {
		return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}}
}

// verifyAtomic reads what a commit whose outcome is unknown left, for at
// most half the lease; then it answers, or goes on reading in the
// background (ErrPending) until the database answers.
func (c *call) verifyAtomic(st *atomicRun, commitErr error, took time.Duration) outcome {
	s := c.s
	rec, found, err := c.readBack(time.Now().Add(s.cfg.lease / 2))
	if err != nil {
		if s.stopped(c.ctx) {
			return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}, err: idem.ErrClosed}
		}
		c.observe(idem.EventTierError, idem.TierSQL, took, err)
		if s.track() {
			go func() {
				defer s.wg.Done()
				if rec, found, err := c.readBack(time.Time{}); err == nil {
					c.judgeAtomic(st, rec, found, commitErr, took)
				}
			}()
		}
		if !errors.Is(err, idem.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", idem.ErrUnavailable, err)
		}
		return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}, err: fmt.Errorf("%w: %w", ErrPending, err)}
	}
	return c.judgeAtomic(st, rec, found, commitErr, took)
}

// judgeAtomic decides from the record read back after a commit whose
// outcome was unknown.
func (c *call) judgeAtomic(st *atomicRun, rec idem.Record, found bool, commitErr error, took time.Duration) outcome {
	if found && rec.Completed() && rec.Fingerprint == c.fp() && string(rec.Result) == string(st.stored) {
		return c.committed(st, took)
	}
	c.releaseRedis()
	err := fmt.Errorf("%w: %w", ErrNotCommitted, commitErr)
	c.observe(idem.EventReleased, idem.TierSQL, took, err)
	return outcome{result: Result{Value: st.val, Tier: idem.TierSQL}, err: err}
}

// readBack reads the key's record in SQL (see readRecord): an atomic
// execution holds no lease to keep meanwhile.
func (c *call) readBack(until time.Time) (rec idem.Record, found bool, err error) {
	rec, found, _, err = c.readRecord(idem.TierSQL, c.s.sql, until, nil)
	return rec, found, err
}
