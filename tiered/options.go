package tiered

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Defaults of a Store.
const (
	// DefaultLease is how long a claim lives without renewal. The owner
	// renews it every lease/3 while its work runs.
	DefaultLease = 30 * time.Second
	// DefaultRetention is how long a completed result is kept. The published
	// range is 24–72 h: shorter defeats real client retries.
	DefaultRetention = 24 * time.Hour
	// DefaultWait is how long a duplicate waits for an in-flight owner
	// before it gets idem.ErrInFlight.
	DefaultWait = 10 * time.Second
	// DefaultRedisTimeout bounds each Redis call made by the Store. It is
	// redislayer's own default, so that a call through a layer left at its
	// defaults carries one deadline (and one timer) rather than two.
	DefaultRedisTimeout = 250 * time.Millisecond
	// DefaultSQLTimeout bounds each SQL call made by the Store.
	DefaultSQLTimeout = 5 * time.Second
	// DefaultRedisFailures is how many Redis failures in a row switch Redis
	// off for the cool-down.
	DefaultRedisFailures = 3
	// DefaultRedisCooldown is how long Redis is skipped after that, before
	// one call probes it again.
	DefaultRedisCooldown = 5 * time.Second
	// DefaultCacheItems, DefaultCacheBytes and DefaultCacheTTL bound the
	// local cache of completed results.
	DefaultCacheItems = 10_000
	DefaultCacheBytes = 32 << 20
	DefaultCacheTTL   = time.Minute
)

// Option configures a Store.
type Option func(*config) error

type config struct {
	redis, sql               idem.Layer
	lease, retention, wait   time.Duration
	redisTimeout, sqlTimeout time.Duration
	redisFailures            int
	redisCooldown            time.Duration
	cacheItems, cacheBytes   int
	cacheTTL                 time.Duration
	observer                 idem.Observer
	failOpen                 bool
	pollMin, pollMax         time.Duration
}

func defaults() config {
	return config{
		lease:         DefaultLease,
		retention:     DefaultRetention,
		wait:          DefaultWait,
		redisTimeout:  DefaultRedisTimeout,
		sqlTimeout:    DefaultSQLTimeout,
		redisFailures: DefaultRedisFailures,
		redisCooldown: DefaultRedisCooldown,
		cacheItems:    DefaultCacheItems,
		cacheBytes:    DefaultCacheBytes,
		cacheTTL:      DefaultCacheTTL,
		pollMin:       10 * time.Millisecond,
		pollMax:       250 * time.Millisecond,
	}
}

// WithRedis sets the fast cross-instance tier, normally a *redislayer.Layer.
// When it implements idem.Waiter, duplicates on other instances wait for its
// completion signal; when it implements idem.Filler, results decided by SQL
// are back-filled into it. Without WithSQL, Redis decides alone (weaker).
func WithRedis(l idem.Layer) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("tiered: WithRedis(nil)")
		}
		c.redis = l
		return nil
	}
}

// WithSQL sets the deciding tier, normally a *sqllayer.Layer. Any idem.Layer
// that is the source of truth fits (a memlayer.Layer in unit tests).
func WithSQL(l idem.Layer) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("tiered: WithSQL(nil)")
		}
		c.sql = l
		return nil
	}
}

// WithLease sets how long a claim lives without renewal. Default
// DefaultLease (30 s). It bounds how long a crashed owner blocks retries.
func WithLease(d time.Duration) Option {
	return func(c *config) error { c.lease = d; return nil }
}

// WithRetention sets how long completed results are kept. Default
// DefaultRetention (24 h).
func WithRetention(d time.Duration) Option {
	return func(c *config) error { c.retention = d; return nil }
}

// WithWait sets how long a duplicate waits for an in-flight owner before it
// gets idem.ErrInFlight. Default DefaultWait (10 s). 0 means do not wait.
func WithWait(d time.Duration) Option {
	return func(c *config) error { c.wait = d; return nil }
}

// WithTimeouts bounds each call to Redis and to SQL. Defaults
// DefaultRedisTimeout (250 ms) and DefaultSQLTimeout (5 s). A call gets at
// most its timeout and at least fifteen sixteenths of it: calls that start
// within a sixteenth of the timeout of each other share one deadline, and
// so one timer.
func WithTimeouts(redis, sql time.Duration) Option {
	return func(c *config) error { c.redisTimeout, c.sqlTimeout = redis, sql; return nil }
}

// WithRedisFallback sets how many Redis failures in a row switch Redis off
// and for how long it is then skipped before one call probes it again.
// Defaults DefaultRedisFailures (3) and DefaultRedisCooldown (5 s).
func WithRedisFallback(failures int, cooldown time.Duration) Option {
	return func(c *config) error { c.redisFailures, c.redisCooldown = failures, cooldown; return nil }
}

// WithLocalCache bounds the in-process cache of completed results: at most
// items entries and bytes of results, each kept at most ttl (and never past
// the record's own expiry). Defaults DefaultCacheItems (10,000),
// DefaultCacheBytes (32 MiB) and DefaultCacheTTL (1 min). items == 0 turns
// the cache off. The cache is split into up to 16 independently locked
// parts, each with its share of both bounds, so that replays on many cores
// do not queue on one lock; a result larger than a part's share of bytes
// (2 MiB by default) is not cached.
func WithLocalCache(items, bytes int, ttl time.Duration) Option {
	return func(c *config) error { c.cacheItems, c.cacheBytes, c.cacheTTL = items, bytes, ttl; return nil }
}

// WithObserver sets the observer of every event. Default none (no cost).
// The Store hands it to the layers it wraps through the context of each
// call, so the events only a layer sees (a takeover, a grace) reach it too:
// give it once, here. When it also implements idem.Tracer, it hears every
// call as a whole (a span per call, every caller counted).
func WithObserver(o idem.Observer) Option {
	return func(c *config) error { c.observer = o; return nil }
}

// WithFailOpen makes Do run fn without a decision when the deciding tier is
// unavailable, instead of failing closed with idem.ErrUnavailable. Default
// off. Only for work where availability matters more than exactly-once: a
// duplicate can then run.
func WithFailOpen(on bool) Option {
	return func(c *config) error { c.failOpen = on; return nil }
}

func (c *config) validate() error {
	var errs []error
	if c.redis == nil && c.sql == nil {
		errs = append(errs, errors.New("no tier to decide: use WithSQL, WithRedis or both"))
	}
	if c.lease < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease %v is shorter than 3ms", c.lease))
	}
	if c.retention <= 0 {
		errs = append(errs, fmt.Errorf("retention %v must be positive", c.retention))
	}
	if c.wait < 0 {
		errs = append(errs, fmt.Errorf("wait %v is negative", c.wait))
	}
	if c.redisTimeout <= 0 || c.sqlTimeout <= 0 {
		errs = append(errs, fmt.Errorf("timeouts must be positive (redis %v, sql %v)", c.redisTimeout, c.sqlTimeout))
	}
	if c.redisFailures < 1 || c.redisCooldown <= 0 {
		errs = append(errs, fmt.Errorf("redis fallback needs failures >= 1 and a positive cool-down (got %d, %v)", c.redisFailures, c.redisCooldown))
	}
	if c.cacheItems < 0 || c.cacheBytes < 0 || (c.cacheItems > 0 && (c.cacheBytes == 0 || c.cacheTTL <= 0)) {
		errs = append(errs, fmt.Errorf("local cache needs items >= 0 and, when on, positive bytes and ttl (got %d, %d, %v)", c.cacheItems, c.cacheBytes, c.cacheTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tiered: invalid configuration: %w", err)
	}
	return nil
}
