package janitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/observe"
)

// Defaults of a Janitor.
const (
	// DefaultInterval is how often a Janitor sweeps.
	DefaultInterval = time.Minute
	// DefaultBatch bounds the rows one DELETE statement removes.
	DefaultBatch = 500
	// DefaultLockTTL is how long the lock lives without a refresh: a
	// sweeper that crashed holds it no longer. It is refreshed every third
	// of it while the sweep runs.
	DefaultLockTTL = 30 * time.Second
	// DefaultLockKey is the Redis key of the lock.
	DefaultLockKey = "idem:janitor"
	// lockless bounds the batch when Redis cannot be reached and every
	// instance may sweep at once.
	lockless = 50
)

// Sweeper deletes expired rows in statements of at most batch rows and
// says how many it deleted; it must spare an in-progress claim until its
// lease and grace have ended, whatever its expiry says. *sqllayer.Layer is
// one.
type Sweeper interface {
	DeleteExpired(ctx context.Context, batch int) (int64, error)
}

// Janitor sweeps expired rows on a schedule. It is safe for concurrent use;
// run it with Run, in one goroutine per Janitor.
type Janitor struct {
	sweeper  Sweeper
	interval time.Duration
	batch    int
	locks    *redislock.Client // nil: no lock
	key      string
	ttl      time.Duration
	obs      idem.Observer
}

// Option configures a Janitor.
type Option func(*Janitor) error

// WithInterval sets how often the Janitor sweeps. Default DefaultInterval;
// it must be positive.
func WithInterval(d time.Duration) Option {
	return func(j *Janitor) error {
		if d <= 0 {
			return fmt.Errorf("janitor: WithInterval(%v): must be positive", d)
		}
		j.interval = d
		return nil
	}
}

// WithBatch sets how many rows one DELETE statement removes at most.
// Default DefaultBatch; it must be positive.
func WithBatch(n int) Option {
	return func(j *Janitor) error {
		if n <= 0 {
			return fmt.Errorf("janitor: WithBatch(%d): must be positive", n)
		}
		j.batch = n
		return nil
	}
}

// WithLock makes instances take turns: a sweep runs only under a
// bsm/redislock lock on client (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). Default: no lock, every instance sweeps.
func WithLock(client redislock.RedisClient) Option {
	return func(j *Janitor) error {
		if client == nil {
			return errors.New("janitor: WithLock(nil): leave the option out for no lock")
		}
		j.locks = redislock.New(client)
		return nil
	}
}

// WithLockKey sets the Redis key of the lock, for several sets of tables
// in one Redis. Default DefaultLockKey.
func WithLockKey(key string) Option {
	return func(j *Janitor) error {
		if key == "" {
			return errors.New("janitor: WithLockKey(\"\")")
		}
		j.key = key
		return nil
	}
}

// WithLockTTL sets how long the lock lives without a refresh, so the
// longest a crashed sweeper blocks the others. Default DefaultLockTTL; at
// least 30 ms (it is refreshed every third of it).
func WithLockTTL(d time.Duration) Option {
	return func(j *Janitor) error {
		if d < 30*time.Millisecond {
			return fmt.Errorf("janitor: WithLockTTL(%v): at least 30ms", d)
		}
		j.ttl = d
		return nil
	}
}

// WithObserver sets the observer of sweeps. Default none: the observer of
// the Store that runs the Janitor (tiered.WithJanitor), which hands it its
// own through the context of Run, if any.
func WithObserver(o idem.Observer) Option {
	return func(j *Janitor) error { j.obs = o; return nil }
}

// New returns a Janitor over s.
func New(s Sweeper, opts ...Option) (*Janitor, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: janitor: nil Sweeper", idem.ErrConfig)
	}
	j := &Janitor{sweeper: s, interval: DefaultInterval, batch: DefaultBatch, key: DefaultLockKey, ttl: DefaultLockTTL}
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(j); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", idem.ErrConfig, err)
	}
	return j, nil
}

// Run sweeps at once and then every interval until ctx ends, and returns
// nil then. A failed sweep is reported to the observer and tried again at
// the next tick.
func (j *Janitor) Run(ctx context.Context) error {
	t := time.NewTicker(j.interval)
	defer t.Stop()
	for {
		_, _, _ = j.Sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep runs one sweep now: it takes the lock (when the Janitor has one),
// deletes expired rows, and lets the lock go. swept is false when another
// instance holds the lock. It reports deleted rows, or the error, to the
// observer.
func (j *Janitor) Sweep(ctx context.Context) (deleted int64, swept bool, err error) {
	start := time.Now()
	defer func() { j.report(ctx, time.Since(start), swept, deleted, err) }()
	if j.locks == nil {
		deleted, err = j.sweeper.DeleteExpired(ctx, j.batch)
		return deleted, true, err
	}
	lock, err := j.locks.Obtain(ctx, j.key, j.ttl, nil)
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return 0, false, nil // another instance sweeps: nothing to report
	case err != nil:
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		// Redis cannot be reached: sweep without the lock, in batches small
		// enough that instances sweeping at once contend for little.
		if obs := j.observer(ctx); obs != nil {
			obs.Observe(ctx, idem.Event{Kind: idem.EventTierError, Tier: idem.TierRedis, Err: fmt.Errorf("janitor: taking the lock: %w", err)})
		}
		deleted, err = j.sweeper.DeleteExpired(ctx, min(j.batch, lockless))
		return deleted, true, err
	}
	sweepCtx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { j.hold(sweepCtx, cancel, lock, stop) })
	deleted, err = j.sweeper.DeleteExpired(sweepCtx, j.batch)
	close(stop)
	wg.Wait()
	if cause := context.Cause(sweepCtx); err != nil && errors.Is(cause, errLockLost) {
		err = fmt.Errorf("%w (after %d rows)", cause, deleted)
	}
	cancel(nil)
	// Release on a context of its own: ctx may have ended.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), j.ttl)
	_ = lock.Release(rctx) // a lock that lapsed is released already
	rcancel()
	return deleted, true, err
}

// report tells the observer what a sweep deleted, and that it failed.
func (j *Janitor) report(ctx context.Context, took time.Duration, swept bool, deleted int64, err error) {
	obs := j.observer(ctx)
	if obs == nil || (!swept && err == nil) {
		return
	}
	if deleted > 0 || err == nil {
		obs.Observe(ctx, idem.Event{Kind: idem.EventSwept, Tier: idem.TierSQL, Duration: took, N: deleted})
	}
	if err != nil && ctx.Err() == nil {
		obs.Observe(ctx, idem.Event{Kind: idem.EventTierError, Tier: idem.TierSQL, Duration: took, Err: err})
	}
}

// observer is the Janitor's own observer, or else the one ctx carries (a
// Store that runs the Janitor hands it its own).
func (j *Janitor) observer(ctx context.Context) idem.Observer {
	if j.obs != nil {
		return j.obs
	}
	return observe.FromContext(ctx)
}

// errLockLost is the cause of a sweep stopped because its lock could not be
// refreshed: another instance may sweep now.
var errLockLost = errors.New("janitor: lock lost while sweeping")

// hold refreshes lock every third of its TTL until stop is closed; when a
// refresh fails the sweep is cancelled, since another instance may take the
// lock once it lapses.
func (j *Janitor) hold(ctx context.Context, cancel context.CancelCauseFunc, lock *redislock.Lock, stop <-chan struct{}) {
	t := time.NewTicker(j.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, j.ttl/3)
		err := lock.Refresh(rctx, j.ttl, nil)
		rcancel()
		if err != nil {
			cancel(fmt.Errorf("%w: %w", errLockLost, err))
			return
		}
	}
}
