package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// DefaultRedisTimeout bounds each Redis call made by the Store. Redis
	// answers a local call in well under a millisecond; 250 ms is long
	// enough for a busy server across a network and short enough that a
	// dead or paused Redis costs a request little before SQL decides alone.
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

// Option configures a Store. Options apply in order over the defaults; an
// option given nonsense makes New fail, with an error that says, under the
// option's name, what to give instead.
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
	logger                   *slog.Logger // WithLogger; nil: slog.Default() when logging
	janitor                  Runner
	failOpen                 bool
	atomic                   bool        // WithAtomic
	atomicLayer              AtomicLayer // sql as an AtomicLayer when atomic; set by validate
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
// Default none; nil is an error (leave the option out for none).
func WithRedis(l idem.Layer) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithRedis: give a layer, or leave the option out for no Redis tier (got nil)")
		}
		c.redis = l
		return nil
	}
}

// WithSQL sets the deciding tier, normally a *sqllayer.Layer. Any idem.Layer
// that is the source of truth fits (a memlayer.Layer in unit tests).
// Default none; nil is an error (leave the option out for none).
func WithSQL(l idem.Layer) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithSQL: give a layer, or leave the option out for no SQL tier (got nil)")
		}
		c.sql = l
		return nil
	}
}

// WithLease sets how long a claim lives without renewal. Default
// DefaultLease (30 s). It bounds how long a crashed owner blocks retries.
// It cannot be zero: a lease shorter than 3 ms, 0 and negative ones
// included, is an error.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("WithLease: give a lease of 3ms or more (got %v)", d)
		}
		c.lease = d
		return nil
	}
}

// WithRetention sets how long completed results are kept. Default
// DefaultRetention (24 h). It cannot be zero: 0 or a negative d is an
// error.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithRetention: give a positive retention, 24h to 72h for client retries (got %v)", d)
		}
		c.retention = d
		return nil
	}
}

// WithWait sets how long a duplicate waits for an in-flight owner before it
// gets idem.ErrInFlight. Default DefaultWait (10 s). 0 means do not wait; a
// negative d is an error.
func WithWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithWait: give 0 (do not wait) or more (got %v)", d)
		}
		c.wait = d
		return nil
	}
}

// WithTimeouts bounds each call to Redis and to SQL. Defaults
// DefaultRedisTimeout (250 ms) and DefaultSQLTimeout (5 s). A call gets at
// most its timeout and at least fifteen sixteenths of it: calls that start
// within a sixteenth of the timeout of each other share one deadline, and
// so one timer.
//
// A call's timeout belongs to whoever makes the call: these bound every
// call the Store makes to a tier, and no layer bounds them again (the
// Redis layer's own timeout, redislayer.WithTimeout, bounds only the round
// trips it makes itself inside a Wait). 0 means no bound of the Store's: a
// call then lasts as long as the client or the database pool and driver
// let it (go-redis's ReadTimeout and WriteTimeout, the DSN's timeouts).
// The risk is the Store's: a hung Redis is no longer skipped in time (each
// call waits for the client to give up), a hung database holds a request
// as long as it hangs, and a result the Store puts into Redis may outlive
// its SQL record by as long as the call took to arrive. The attempts that renew a lease or store a completion
// stay bounded by lease/8 either way. A negative timeout is an error.
func WithTimeouts(redis, sql time.Duration) Option {
	return func(c *config) error {
		var errs []error
		if redis < 0 {
			errs = append(errs, fmt.Errorf("WithTimeouts: give a Redis timeout of 0 (no bound of the Store's own) or more (got %v)", redis))
		}
		if sql < 0 {
			errs = append(errs, fmt.Errorf("WithTimeouts: give a SQL timeout of 0 (no bound of the Store's own) or more (got %v)", sql))
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		c.redisTimeout, c.sqlTimeout = redis, sql
		return nil
	}
}

// WithRedisFallback sets how many Redis failures in a row switch Redis off
// and for how long it is then skipped before one call probes it again.
// Defaults DefaultRedisFailures (3) and DefaultRedisCooldown (5 s).
// failures 0 means never switch Redis off (every call then tries it, and
// waits for its timeout while it is down); the cool-down is then unused and
// may be 0. With failures above 0 the cool-down cannot be zero. A negative
// value is an error.
func WithRedisFallback(failures int, cooldown time.Duration) Option {
	return func(c *config) error {
		switch {
		case failures < 0:
			return fmt.Errorf("WithRedisFallback: give 0 failures (never switch Redis off) or more (got %d)", failures)
		case cooldown < 0:
			return fmt.Errorf("WithRedisFallback: give a cool-down of 0 or more (got %v)", cooldown)
		case failures > 0 && cooldown == 0:
			return fmt.Errorf("WithRedisFallback: give a positive cool-down, or 0 failures: a cool-down of 0 would switch Redis on again at once (got %d, %v)", failures, cooldown)
		}
		c.redisFailures, c.redisCooldown = failures, cooldown
		return nil
	}
}

// WithLocalCache bounds the in-process cache of completed results: at most
// items entries and bytes of results, each kept at most ttl (and never past
// the record's own expiry). Defaults DefaultCacheItems (10,000),
// DefaultCacheBytes (32 MiB) and DefaultCacheTTL (1 min). items 0 turns
// the cache off (bytes and ttl are then unused and may be 0). With items
// above 0, bytes and ttl cannot be zero. A negative value is an error. The
// cache is split into up to 16 independently locked parts, each with its
// share of both bounds, so that replays on many cores do not queue on one
// lock; a result larger than a part's share of bytes (2 MiB by default) is
// not cached.
func WithLocalCache(items, bytes int, ttl time.Duration) Option {
	return func(c *config) error {
		if items < 0 || bytes < 0 || ttl < 0 || (items > 0 && (bytes == 0 || ttl == 0)) {
			return fmt.Errorf("WithLocalCache: give 0 items (no cache), or positive items, bytes and ttl (got %d, %d, %v)", items, bytes, ttl)
		}
		c.cacheItems, c.cacheBytes, c.cacheTTL = items, bytes, ttl
		return nil
	}
}

// WithLogger sets the logger of what an operator must hear of a Store
// even without an observer: Redis switched off after WithRedisFallback's
// failures in a row (Warn) and back on after a probe answers (Info), each
// once per change, never once per failed call or probe; and the first
// configuration error of each tier (Error, such as a forgotten Init).
// Default nil: slog.Default() at the time of each message. To hear nothing,
// give slog.New(slog.DiscardHandler). An observer (WithObserver) hears the
// same changes as EventFallbackOn and EventFallbackOff, and every failure
// besides. go-redis writes its own messages, such as a failed dial, through
// a process-wide logger of its own: redislayer.NewClientLogger sends them to
// a *slog.Logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithObserver sets the observer of every event. Default none (no cost);
// nil is none. It is the one observer of a stack: the Store hands it to the
// layers it wraps through the context of each call
// (idem.ContextWithObserver), so the events only a layer sees (a takeover,
// a grace) reach it too, and to the janitor it runs (WithJanitor); neither
// has an observer option of its own. When it also implements idem.Tracer, it hears every
// call as a whole (a span per call, every caller counted).
func WithObserver(o idem.Observer) Option {
	return func(c *config) error { c.observer = o; return nil }
}

// Runner is work a Store runs in the background for its lifetime. A
// *janitor.Janitor is one.
type Runner interface {
	// Run works until ctx ends.
	Run(ctx context.Context) error
}

// WithJanitor makes the Store run j (a *janitor.Janitor, which deletes
// expired rows on a schedule, one instance of N at a time) in a goroutine
// of its own from New until Close; Close stops it and waits for it. The
// Store's observer hears its sweeps.
// Default none. nil is an error (leave the option out for none).
func WithJanitor(j Runner) Option {
	return func(c *config) error {
		if j == nil {
			return errors.New("WithJanitor: give a janitor, or leave the option out for none (got nil)")
		}
		c.janitor = j
		return nil
	}
}

// WithFailOpen makes Do run fn without a decision when the deciding tier is
// unavailable, instead of failing closed with idem.ErrUnavailable. Default
// off. Only for work where availability matters more than exactly-once: a
// duplicate can then run.
func WithFailOpen(on bool) Option {
	return func(c *config) error { c.failOpen = on; return nil }
}

// validate checks what no single option can: that some tier decides.
func (c *config) validate() error {
	if c.redis == nil && c.sql == nil {
		return errors.New("New: give a tier to decide, WithSQL, WithRedis or both (got no tier)")
	}
	return c.validateAtomic()
}
