package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/deadline"
	"github.com/idemkit/idem/internal/guess"
	"github.com/idemkit/idem/internal/schedule"
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

// Store runs functions at most once per key across every tier it was given.
// It is safe for concurrent use. Close it to stop its goroutines.
type Store struct {
	cfg    config
	redis  idem.Layer
	sql    idem.Layer
	waiter idem.Waiter    // redis as a Waiter, or nil
	filler idem.Filler    // redis as a Filler, or nil
	cache  *cache         // nil when off
	health *health        // Redis health; nil without Redis
	guess  *guess.Counter // whether calls need SQL (see overlap.go); with both tiers only
	obs    idem.Observer
	tracer idem.Tracer // obs as a Tracer, or nil

	configLogged [idem.TierSQL + 1]atomic.Bool // a configuration error of the tier was logged

	// flights holds the calls in flight in this process.
	flights flights
	// redisBounds and sqlBounds give each call to Redis and SQL its
	// deadline; redisHoldBounds and sqlHoldBounds each renewal and
	// completion attempt its own, at most lease/8 (see hold). Like the
	// per-call timeouts they replace, Close does not cut a tier call short:
	// it reaches the phases through stopped.
	redisBounds, sqlBounds         *deadline.Bound
	redisHoldBounds, sqlHoldBounds *deadline.Bound
	// renewals starts the renewers of executions whose work outlasts
	// lease/3.
	renewals *schedule.Queue[*renewal]

	base   context.Context // parent of all work; cancelled by Close
	stop   context.CancelCauseFunc
	closed atomic.Bool
	// wg counts the goroutines the Store started (executions on goroutines
	// of their own, renewers, background completions); trackMu orders
	// adding to it against Close's Wait.
	trackMu sync.RWMutex
	wg      sync.WaitGroup
}

// New returns a Store. At least one of WithSQL and WithRedis is required;
// every other option has a default (see the Default constants). A missing
// tier and options given nonsense make New fail with one error that names
// each of them and wraps idem.ErrConfig.
func New(opts ...Option) (*Store, error) {
	cfg := defaults()
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: tiered: %w", idem.ErrConfig, err)
	}
	s := &Store{
		cfg:         cfg,
		redis:       cfg.redis,
		sql:         cfg.sql,
		cache:       newCache(cfg.cacheItems, cfg.cacheBytes, cfg.cacheTTL),
		obs:         cfg.observer,
		redisBounds: deadline.New(cfg.redisTimeout),
		sqlBounds:   deadline.New(cfg.sqlTimeout),
	}
	s.redisHoldBounds = deadline.New(holdTimeout(cfg.redisTimeout, cfg.lease))
	s.sqlHoldBounds = deadline.New(holdTimeout(cfg.sqlTimeout, cfg.lease))
	s.renewals = schedule.New(s.startRenewer)
	s.tracer, _ = s.obs.(idem.Tracer)
	if s.redis != nil {
		s.waiter, _ = s.redis.(idem.Waiter)
		s.filler, _ = s.redis.(idem.Filler)
		s.health = newHealth(cfg.redisFailures, cfg.redisCooldown, cfg.observer)
		if s.sql != nil {
			// A new Store expects duplicates, so that its first ones (a
			// restart amid retries) cost the database nothing; the first
			// call that needs SQL turns overlapping on.
			s.guess = guess.New(false)
		}
	}
	s.base, s.stop = context.WithCancelCause(context.Background())
	if j := cfg.janitor; j != nil && s.track() {
		go func() {
			defer s.wg.Done()
			ctx := s.base
			if s.obs != nil {
				ctx = idem.ContextWithObserver(ctx, s.obs)
			}
			_ = j.Run(ctx) // it reports its own failures; it returns when ctx ends
		}()
	}
	return s, nil
}

// Close cancels the work still running (its context ends, the key is
// released) and waits for every goroutine the Store started. A completion
// still pending is abandoned: its claim lapses after the lease. It does not
// close the layers: their owner does. Calls after Close get [idem.ErrClosed].
func (s *Store) Close() error {
	s.trackMu.Lock()
	already := s.closed.Swap(true)
	s.trackMu.Unlock()
	if already {
		return nil
	}
	s.stop(idem.ErrClosed)
	s.renewals.Stop()
	s.flights.cancelWork(idem.ErrClosed)
	s.wg.Wait()
	return nil
}

// track counts a goroutine the Store is about to start, which must call
// s.wg.Done when it ends. After Close it reports false and counts nothing:
// Close may be waiting already.
func (s *Store) track() bool {
	s.trackMu.RLock()
	defer s.trackMu.RUnlock()
	if s.closed.Load() {
		return false
	}
	s.wg.Add(1)
	return true
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

// follow waits for the execution c that another caller in this process
// leads, as a duplicate waits for an owner on another instance: at most the
// Store's wait from start, and no longer than ctx lasts. The execution
// itself goes on whatever this caller does.
func (s *Store) follow(ctx context.Context, c *call, start time.Time) (Result, error) {
	if start.IsZero() {
		start = time.Now()
	}
	waited := false
	select {
	case <-c.flight.Done(): // ended already: no timer needed
	default:
		if err := s.await(ctx, c, start); err != nil {
			return Result{}, err
		}
		waited = true
	}
	o := c.out
	o.result.Replayed = true
	o.result.Waited = waited
	if errors.Is(o.err, ErrPending) || errors.Is(o.err, idem.ErrLeaseLost) || errors.Is(o.err, idem.ErrClosed) || errors.Is(o.err, ErrNotCommitted) {
		// The leader's value is not the key's result: it may never be
		// stored, or another owner's stands. Only the leader sees it.
		o.result.Value = nil
	}
	switch {
	case o.err == nil:
		o.result.Tier = idem.TierLocal
		if waited {
			s.observe(ctx, idem.EventWaited, idem.TierLocal, c.key, time.Since(start), nil)
		}
		s.observe(ctx, idem.EventReplay, idem.TierLocal, c.key, 0, nil)
	case errors.Is(o.err, idem.ErrMismatch):
		o.result.Tier = idem.TierLocal
		s.observe(ctx, idem.EventMismatch, idem.TierLocal, c.key, 0, nil)
	case errors.Is(o.err, idem.ErrInFlight):
		o.result.Tier = idem.TierLocal
		s.observe(ctx, idem.EventInFlight, idem.TierLocal, c.key, time.Since(start), nil)
	}
	return o.result, o.err
}

// await waits for c to end, for at most the Store's wait since start and
// while ctx lasts.
func (s *Store) await(ctx context.Context, c *call, start time.Time) error {
	wait := time.NewTimer(s.cfg.wait - time.Since(start))
	defer wait.Stop()
	select {
	case <-c.flight.Done():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-wait.C:
		s.observe(ctx, idem.EventInFlight, idem.TierLocal, c.key, time.Since(start), nil)
		return idem.ErrInFlight
	case <-s.base.Done():
		return idem.ErrClosed
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

func (s *Store) observe(ctx context.Context, kind idem.EventKind, tier idem.Tier, key idem.Key, d time.Duration, err error) {
	if s.obs != nil {
		s.obs.Observe(ctx, idem.Event{Kind: kind, Tier: tier, Key: key, Duration: d, Err: err})
	}
}

// redisFailed records a Redis failure: an event, and a strike towards
// switching Redis off. A caller's own cancellation is no strike.
func (s *Store) redisFailed(ctx context.Context, key idem.Key, err error) {
	if errors.Is(err, context.Canceled) && s.stopped(ctx) {
		return
	}
	s.observe(ctx, idem.EventTierError, idem.TierRedis, key, 0, err)
	if errors.Is(err, idem.ErrConfig) {
		s.misconfigured(ctx, idem.TierRedis, err)
	}
	s.health.fail(ctx, err, time.Now())
}

// misconfigured reports a configuration error of tier once per Store and
// tier: the observer hears every one (EventTierError), but a Store without
// an observer would otherwise fail every request without a word in the log
// (a forgotten Init looks like an outage), so it logs the first through
// slog.Default.
func (s *Store) misconfigured(ctx context.Context, tier idem.Tier, err error) {
	if s.obs != nil || !s.configLogged[tier].CompareAndSwap(false, true) {
		return
	}
	slog.Default().ErrorContext(ctx, "idem: configuration error: every call that needs this tier fails until it is fixed",
		slog.String("tier", tier.String()), slog.String("err", err.Error()))
}

// stopped reports whether the call should give up: ctx ended or the Store
// closed. The phases before the work run on the caller's values without any
// cancellation (see Do), so Close reaches them through this check.
func (s *Store) stopped(ctx context.Context) bool { return ctx.Err() != nil || s.base.Err() != nil }

// sleep waits d, or until ctx ends or the Store closes; it reports whether
// d passed.
func (s *Store) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.base.Done():
		return false
	}
}
