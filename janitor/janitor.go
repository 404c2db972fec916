package janitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/option"
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

// SweepRecorder is a Sweeper that also keeps each run of the janitor
// where an operator can read it (idem stats: when expired rows were last
// swept, and by which host). *sqllayer.Layer is one: it records the runs in
// its audit table, once that table exists. The Janitor calls RecordSweep
// after each sweep it ran (not when another instance held the lock), with
// what the sweep deleted, how long it took and its error; a failure to
// record is reported to the observer and changes nothing else.
type SweepRecorder interface {
	Sweeper
	RecordSweep(ctx context.Context, deleted int64, took time.Duration, sweepErr error) error
}

// recordTimeout bounds the recording of one run.
const recordTimeout = 5 * time.Second

// Janitor sweeps expired rows on a schedule. It is safe for concurrent use;
// run it with Run, in one goroutine per Janitor. It reports each sweep to
// the observer of the context it runs under (idem.ContextWithObserver): a
// Store that runs it (tiered.WithJanitor) hands it the Store's.
type Janitor struct {
	sweeper Sweeper
	config
}

// Option configures a Janitor. Options apply in order over the defaults; an
// option given nonsense makes New fail.
type Option func(*config) error

type config struct {
	interval time.Duration
	batch    int
	locks    *redislock.Client // nil: no lock
	key      string
	ttl      time.Duration
	stmtTime time.Duration // the time a paced statement aims at
	duty     float64       // the share of a paced sweep's time in statements
	rate     int           // at most this many rows a second; 0: no bound
}

// WithInterval sets how often the Janitor sweeps. Default DefaultInterval;
// it must be positive.
func WithInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithInterval: give a positive interval (got %v)", d)
		}
		c.interval = d
		return nil
	}
}

// WithBatch sets how many rows one DELETE statement removes at most.
// Default DefaultBatch; it must be positive.
func WithBatch(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("WithBatch: give a positive number of rows (got %d)", n)
		}
		c.batch = n
		return nil
	}
}

// WithLock makes instances take turns: a sweep runs only under a
// bsm/redislock lock on client (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). Default: no lock, every instance sweeps.
func WithLock(client redislock.RedisClient) Option {
	return func(c *config) error {
		if client == nil {
			return errors.New("WithLock: give a client, or leave the option out for no lock (got nil)")
		}
		c.locks = redislock.New(client)
		return nil
	}
}

// WithLockKey sets the Redis key of the lock, for several sets of tables
// in one Redis. Default DefaultLockKey.
func WithLockKey(key string) Option {
	return func(c *config) error {
		if key == "" {
			return errors.New("WithLockKey: give a key, or leave the option out for DefaultLockKey (got \"\")")
		}
		c.key = key
		return nil
	}
}

// WithLockTTL sets how long the lock lives without a refresh, so the
// longest a crashed sweeper blocks the others. Default DefaultLockTTL; at
// least 30 ms (it is refreshed every third of it).
func WithLockTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 30*time.Millisecond {
			return fmt.Errorf("WithLockTTL: give 30ms or more (got %v)", d)
		}
		c.ttl = d
		return nil
	}
}

// New returns a Janitor over s. A nil s and options given nonsense make it
// fail with one error that names each fault and wraps idem.ErrConfig.
func New(s Sweeper, opts ...Option) (*Janitor, error) {
	c := config{interval: DefaultInterval, batch: DefaultBatch, key: DefaultLockKey, ttl: DefaultLockTTL,
		stmtTime: DefaultStatementTime, duty: DefaultDutyCycle}
	faults := option.Apply(&c, opts)
	if s == nil {
		faults = append(faults, errors.New("New: give a Sweeper, such as a *sqllayer.Layer (got nil)"))
	}
	if err := option.Refuse("janitor", faults...); err != nil {
		return nil, err
	}
	return &Janitor{sweeper: s, config: c}, nil
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
	defer func() {
		took := time.Since(start)
		j.report(ctx, took, swept, deleted, err)
		if swept {
			j.record(ctx, took, deleted, err)
		}
	}()
	if j.locks == nil {
		deleted, err = j.sweep(ctx, j.batch)
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
		if obs := idem.ObserverFrom(ctx); obs != nil {
			obs.Observe(ctx, idem.Event{Kind: idem.EventTierError, Tier: idem.TierRedis, Err: fmt.Errorf("janitor: taking the lock: %w", err)})
		}
		deleted, err = j.sweep(ctx, min(j.batch, lockless))
		return deleted, true, err
	}
	sweepCtx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { j.hold(sweepCtx, cancel, lock, stop) })
	deleted, err = j.sweep(sweepCtx, j.batch)
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

// report tells the observer of ctx what a sweep deleted, and that it
// failed.
func (j *Janitor) report(ctx context.Context, took time.Duration, swept bool, deleted int64, err error) {
	obs := idem.ObserverFrom(ctx)
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

// record keeps the run with the sweeper, when it is a SweepRecorder, on a
// context of its own: ctx may have ended the sweep.
func (j *Janitor) record(ctx context.Context, took time.Duration, deleted int64, sweepErr error) {
	rec, ok := j.sweeper.(SweepRecorder)
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := rec.RecordSweep(rctx, deleted, took, sweepErr); err != nil {
		if obs := idem.ObserverFrom(ctx); obs != nil {
			obs.Observe(ctx, idem.Event{Kind: idem.EventTierError, Tier: idem.TierSQL, Err: fmt.Errorf("janitor: recording the sweep: %w", err)})
		}
	}
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
