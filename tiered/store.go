package tiered

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sync/singleflight"

	"github.com/idemkit/idem"
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
	// shared bursts, TierRedis or TierSQL for a stored result or a decision,
	// TierNone for work run without a decision under WithFailOpen.
	Tier idem.Tier
}

// Store runs functions at most once per key across every tier it was given.
// It is safe for concurrent use. Close it to stop its goroutines.
type Store struct {
	cfg    config
	redis  idem.Layer
	sql    idem.Layer
	waiter idem.Waiter // redis as a Waiter, or nil
	filler idem.Filler // redis as a Filler, or nil
	cache  *cache      // nil when off
	health *health     // Redis health; nil without Redis
	obs    idem.Observer

	// groups collapse concurrent calls for one key and fingerprint, split
	// by the key's digest so that unrelated keys do not queue on one lock.
	groups [16]singleflight.Group
	// rbound and sbound give each call to Redis and SQL its deadline.
	rbound, sbound *bounds

	base   context.Context // parent of all work; cancelled by Close
	stop   context.CancelCauseFunc
	wg     sync.WaitGroup // renewers
	closed atomic.Bool
}

// New returns a Store. At least one of WithSQL and WithRedis is required;
// every other option has a default (see the Default constants). Nonsense
// configuration is an error.
func New(opts ...Option) (*Store, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:    cfg,
		redis:  cfg.redis,
		sql:    cfg.sql,
		cache:  newCache(cfg.cacheItems, cfg.cacheBytes, cfg.cacheTTL),
		obs:    cfg.observer,
		rbound: newBounds(cfg.redisTimeout),
		sbound: newBounds(cfg.sqlTimeout),
	}
	if s.redis != nil {
		s.waiter, _ = s.redis.(idem.Waiter)
		s.filler, _ = s.redis.(idem.Filler)
		s.health = &health{maxFailures: cfg.redisFailures, cooldown: cfg.redisCooldown, obs: cfg.observer}
		s.health.clean.Store(true)
	}
	s.base, s.stop = context.WithCancelCause(context.Background())
	return s, nil
}

// Close cancels the work still running (its context ends, the key is
// released) and waits for every goroutine the Store started. It does not
// close the layers: their owner does. Calls after Close get ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stop(ErrClosed)
	s.wg.Wait()
	return nil
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
// another fingerprint; idem.ErrInFlight when another owner still works after
// the wait; idem.ErrUnavailable when the deciding tier cannot answer (fn did
// not run); idem.ErrLeaseLost when fn ran but lost its lease (its result was
// not stored); ErrNotReplayable (wrapping idem.ErrTooLarge) when fn's
// result was too large to keep, for the owner (with the value) and for
// every later caller; *PanicError when fn panicked; fn's own error (with the
// value fn returned in Result.Value). When ctx ends first, Do returns its
// cause at once; the work goes on for the other callers.
//
// When fn succeeded but the deciding tier cannot take the completion, Do
// still returns the result, and the Store keeps completing in the
// background until the tier accepts it, refuses the token (another owner
// took over after the lease), or the Store closes.
func (s *Store) Do(ctx context.Context, key idem.Key, fingerprint string, fn Func) (Result, error) {
	if s.closed.Load() {
		return Result{}, ErrClosed
	}
	if key.IsZero() {
		return Result{}, idem.ErrInvalidKey
	}
	if fn == nil {
		return Result{}, errors.New("tiered: nil fn")
	}
	if s.cache != nil { // the clock costs a reading only when a cache needs it
		if fp, v, ok := s.cache.get(key, time.Now()); ok {
			if fp != fingerprint {
				s.observe(ctx, idem.EventMismatch, idem.TierLocal, key, 0, nil)
				return Result{}, idem.ErrMismatch
			}
			s.observe(ctx, idem.EventReplay, idem.TierLocal, key, 0, nil)
			o := replayed(v, idem.TierLocal)
			return o.result, o.err
		}
	}
	d := key.Digest()
	group := &s.groups[d[0]%byte(len(s.groups))]
	e := &execution{s: s, ctx: ctx, key: key, fp: fingerprint, fn: fn}
	name := e.flight(&d)
	if ctx.Done() == nil {
		// A caller that cannot give up waits for the execution anyway: run
		// it on this goroutine, which saves a goroutine and its stack growth
		// per execution. execute never panics, so Do cannot re-panic.
		v, _, _ := group.Do(name, e.lead)
		return s.share(ctx, key, e, v.(*execution))
	}
	ch := group.DoChan(name, e.lead)
	select {
	case r := <-ch:
		return s.share(ctx, key, e, r.Val.(*execution))
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// execution is one caller's bid to lead an execution of key and
// fingerprint. The caller whose lead singleflight runs stores the outcome in
// its own execution, and every caller of that flight gets that execution
// back: the one that gets its own led.
type execution struct {
	s   *Store
	ctx context.Context
	key idem.Key
	fp  string
	fn  Func
	out outcome
	// name holds the flight's name (the key's digest, then the
	// fingerprint) when the fingerprint fits, as the hex SHA-256 ones of
	// package fingerprint do: one allocation for both.
	name [idem.KeySize + 64]byte
}

// flight returns the singleflight name of e: the key's digest d and the
// fingerprint. It points into e, which never changes after Do made it.
func (e *execution) flight(d *[idem.KeySize]byte) string {
	if len(e.fp) > len(e.name)-len(d) {
		return string(d[:]) + e.fp
	}
	n := copy(e.name[:], d[:])
	n += copy(e.name[n:], e.fp)
	return unsafe.String(&e.name[0], n)
}

// lead runs the execution. It keeps the leading caller's values (trace
// spans, request data) but none of its cancellation. It ends with the
// Store: the phases check for Close, and the work's own context is
// cancelled by it.
func (e *execution) lead() (any, error) {
	e.out = e.s.execute(detach(e.ctx), e.key, e.fp, e.fn)
	return e, nil
}

// detach returns ctx's values without its cancellation or deadline. A
// context that has neither (context.Background, a consumer's loop) is
// already detached.
func detach(ctx context.Context) context.Context {
	if detached(ctx) {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// detached reports whether ctx can neither be cancelled nor run out.
func detached(ctx context.Context) bool {
	if ctx.Done() != nil {
		return false
	}
	_, ok := ctx.Deadline()
	return !ok
}

// share turns the execution that ran for this caller's bid into the
// caller's answer: a caller whose own bid did not run got a replay.
func (s *Store) share(ctx context.Context, key idem.Key, bid, ran *execution) (Result, error) {
	o := ran.out
	if ran != bid {
		o.result.Replayed = true
		if o.err == nil {
			o.result.Tier = idem.TierLocal
			s.observe(ctx, idem.EventReplay, idem.TierLocal, key, 0, nil)
		}
	}
	return o.result, o.err
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
