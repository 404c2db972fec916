package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redis is a Redis server for a test: a real one, or an embedded miniredis.
type Redis struct {
	// Options are the client options for the server. Client copies them.
	Options *redis.Options
	// Mini is the embedded server, nil for a real one. Tests advance its
	// clock with Mini.FastForward.
	Mini *miniredis.Miniredis
}

// Real reports whether r is a real Redis server.
func (r *Redis) Real() bool { return r.Mini == nil }

// Kind returns "redis" or "miniredis".
func (r *Redis) Kind() string {
	if r.Real() {
		return "redis"
	}
	return "miniredis"
}

// Client returns a new client of its own, closed when the test ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	o := *r.Options
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RedisOptions returns the options of the real Redis named by
// IDEM_REDIS_URL or found on the default port, with ContextTimeoutEnabled
// set, or an error saying why there is none.
func RedisOptions() (*redis.Options, error) {
	url := DefaultRedisURL
	if v := getenv(EnvRedis); v != "" {
		url = v
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	// As every client built for idem should: the layer's per-call deadline
	// then bounds socket reads and writes too.
	o.ContextTimeoutEnabled = true
	if err := reachable(o.Addr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c := redis.NewClient(o)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	return o, nil
}

// AnyRedis returns the real Redis when there is one, else a miniredis for
// this test (a failure instead under IDEM_REQUIRE_SERVICES=1).
func AnyRedis(t testing.TB) *Redis {
	t.Helper()
	o, err := RedisOptions()
	if err == nil {
		t.Logf("testenv: real redis at %s", o.Addr)
		return &Redis{Options: o}
	}
	if Required() {
		t.Fatalf("redis is required (%s=1) but unavailable: %v", EnvRequire, err)
	}
	t.Logf("testenv: no real redis (%v): using miniredis", err)
	return MiniRedis(t)
}

// RealRedis returns the real Redis, or skips the test (fails it under
// IDEM_REQUIRE_SERVICES=1).
func RealRedis(t testing.TB) *Redis {
	t.Helper()
	o, err := RedisOptions()
	if err != nil {
		missing(t, "redis", err.Error())
	}
	return &Redis{Options: o}
}

// MiniRedis starts an embedded miniredis for this test and closes it when the
// test ends. Its clock does not run by itself: advance it with FastForward.
func MiniRedis(t testing.TB) *Redis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatalf("miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	return &Redis{Options: &redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true}, Mini: m}
}
