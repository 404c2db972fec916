package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/deadline"
)

// Func is the work a Store runs at most once per key. Its context carries
// the values of the caller that started the execution but is detached from
// every caller's cancellation: it ends only when the Store is closed or the
// lease is lost (cause idem.ErrLeaseLost). A non-nil error releases the key so
// that a retry runs again; the value returned with it still reaches the
// callers of this execution but is not stored.
type Func func(ctx context.Context) ([]byte, error)

// Result is the answer of Do.
type Result struct {
	// Value is fn's result. It is shared by every caller of one execution
	// and by the local cache: treat it as read-only.
	Value []byte
	// Replayed is true when this caller did not run fn: the result was
	// stored earlier, or another caller's execution was shared.
	Replayed bool
	// Tier is where the answer came from: TierLocal for the local cache and
	// shared bursts, TierRedis or TierSQL for a stored result or a decision
	// (a mismatch and an owner in flight included), TierNone for work run
	// without a decision under WithFailOpen and for errors no tier gave.
	Tier idem.Tier
	// Waited is true when this caller waited for an owner in flight (in
	// this process or another) and got its result.
	Waited bool
}

// outcome is what one execution hands to every caller that shared it.
type outcome struct {
	result Result
	err    error
}

// Do runs fn once for key and fingerprint, or returns the result of the run
// that happened or is happening elsewhere.
//
// Errors (check with errors.Is): idem.ErrMismatch when key is bound to
// another fingerprint; idem.ErrInFlight when another owner, in this process
// or another, still works after the wait; idem.ErrUnavailable when the
// deciding tier cannot answer (fn did not run), or when fn ran but the
// deciding tier has not yet accepted its result (see below); idem.ErrLeaseLost
// when fn ran but lost its lease (its result was not stored);
// ErrNotReplayable (wrapping idem.ErrTooLarge) when fn's result was too
// large to keep, for the owner (with the value) and for every later caller;
// *PanicError when fn panicked; ErrGoexit when fn called runtime.Goexit
// (the key is released; a caller whose ctx cannot be cancelled ran fn on
// its own goroutine, which exits, so its Do does not return);
// ErrNotCommitted when fn completed its reservation in a transaction that
// did not commit; idem.ErrClosed when the Store is closed, or closes while
// the call waits or the work runs; fn's own error (with the value fn
// returned in Result.Value). When ctx ends first, Do returns its cause at
// once; the work goes on for the other callers.
//
// When fn completed its reservation in a transaction that committed, the
// committed result is the answer whatever fn did next: Do returns it with
// no error, also when fn then returned an error, panicked or called
// runtime.Goexit.
//
// Do reports success only for a result the deciding tier has accepted.
// When fn succeeded but the deciding tier cannot take the completion within
// half the lease, Do returns fn's value in Result.Value with ErrPending
// (which wraps idem.ErrUnavailable), and the Store goes on completing in
// the background, holding the lease, until the tier accepts the result (a
// retry then replays it), refuses the token (another owner took over: its
// result stands), or the Store closes.
func (s *Store) Do(ctx context.Context, key idem.Key, fingerprint string, fn Func) (Result, error) {
	if s.tracer == nil {
		return s.do(ctx, key, fingerprint, fn)
	}
	start := time.Now()
	ctx, end := s.tracer.StartCall(ctx, key)
	returned := false
	defer func() {
		if !returned {
			// fn called runtime.Goexit on this goroutine (see do): the
			// call ends without an answer, but its span ends too.
			end(idem.CallEnd{Outcome: idem.OutcomeFailed, Duration: time.Since(start), Err: ErrGoexit})
		}
	}()
	res, err := s.do(ctx, key, fingerprint, fn)
	returned = true
	end(idem.CallEnd{Outcome: outcomeOf(ctx, res, err), Tier: res.Tier, Duration: time.Since(start), Err: err, Waited: res.Waited})
	return res, err
}

// outcomeOf names how a call that returned res and err ended. A call that
// waited for an owner in flight and got its result is a replay like any
// other: CallEnd.Waited says it waited.
func outcomeOf(ctx context.Context, res Result, err error) idem.Outcome {
	var pe *PanicError
	switch {
	case err == nil && !res.Replayed:
		return idem.OutcomeExecuted
	case err == nil:
		return idem.OutcomeReplayed
	case errors.Is(err, idem.ErrMismatch):
		return idem.OutcomeMismatch
	case errors.Is(err, idem.ErrInFlight):
		return idem.OutcomeInFlight
	case errors.Is(err, ErrPending):
		return idem.OutcomePending
	case errors.Is(err, idem.ErrConfig):
		return idem.OutcomeConfig
	case errors.Is(err, idem.ErrUnavailable):
		return idem.OutcomeUnavailable
	case errors.Is(err, idem.ErrLeaseLost):
		return idem.OutcomeLeaseLost
	case errors.Is(err, ErrNotReplayable):
		return idem.OutcomeNotReplayable
	case errors.Is(err, idem.ErrClosed):
		return idem.OutcomeClosed
	case errors.Is(err, idem.ErrInvalidKey), errors.Is(err, errNilFunc):
		return idem.OutcomeInvalid
	case errors.As(err, &pe):
		return idem.OutcomeFailed
	case ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		return idem.OutcomeCanceled
	}
	return idem.OutcomeFailed // fn's own error
}

// errNilFunc is Do's answer to a nil fn.
var errNilFunc = errors.New("tiered: nil fn")

func (s *Store) do(ctx context.Context, key idem.Key, fingerprint string, fn Func) (Result, error) {
	if s.closed.Load() {
		return Result{}, idem.ErrClosed
	}
	if key.IsZero() {
		return Result{}, idem.ErrInvalidKey
	}
	if fn == nil {
		return Result{}, errNilFunc
	}
	var start time.Time
	if s.cache != nil { // the clock costs a reading only when a cache needs it
		start = time.Now()
		if fp, v, ok := s.cache.get(key, start); ok {
			if fp != fingerprint {
				s.observe(ctx, idem.EventMismatch, idem.TierLocal, key, 0, nil)
				return Result{Tier: idem.TierLocal}, idem.ErrMismatch
			}
			s.observe(ctx, idem.EventReplay, idem.TierLocal, key, 0, nil)
			o := replayed(v, idem.TierLocal)
			return o.result, o.err
		}
	}
	c := &call{s: s, ctx: ctx, key: key, fn: fn, fingerprint: fingerprint, start: start}
	cancellable := ctx.Done() != nil // this caller waits on a channel if it leads
	cur, lead := s.flights.join(c, cancellable)
	if !lead {
		return s.follow(ctx, cur, start)
	}
	if !cancellable {
		// A caller that cannot give up waits for the execution anyway: run
		// it on this goroutine, which saves a goroutine and its stack growth
		// per execution.
		c.lead()
		return c.out.result, c.out.err
	}
	if !s.track() { // closed meanwhile: end the call here, for those that joined it
		c.out = outcome{err: idem.ErrClosed}
		s.flights.leave(c)
		return Result{}, idem.ErrClosed
	}
	go func() {
		defer s.wg.Done()
		c.lead()
	}()
	select {
	case <-c.flight.Done():
		return c.out.result, c.out.err
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// detach returns ctx's values without its cancellation or deadline. A
// context that has neither (context.Background, a consumer's loop) is
// already detached.
func detach(ctx context.Context) context.Context {
	if deadline.Detached(ctx) {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// onceFingerprint is the fingerprint Once uses: a message ID names one
// intent, so there is nothing else to compare.
const onceFingerprint = "once"

// Once runs fn at most once per key, for queue consumers. duplicate is true
// when fn ran before (or is running elsewhere and finished within the wait)
// and did not run now. An error from fn releases the key so that a
// redelivery runs it again; ErrInFlight means another consumer still holds
// it — redeliver later.
func (s *Store) Once(ctx context.Context, key idem.Key, fn func(ctx context.Context) error) (duplicate bool, err error) {
	res, err := s.Do(ctx, key, onceFingerprint, func(ctx context.Context) ([]byte, error) {
		return nil, fn(ctx)
	})
	if err != nil {
		return false, err
	}
	return res.Replayed, nil
}
