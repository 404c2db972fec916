package redislayer_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newLayer returns a layer over c with a fresh prefix, closed when the test
// ends (before c, whose cleanup was registered first).
func newLayer(t testing.TB, c redislayer.Client, opts ...redislayer.Option) *redislayer.Layer {
	t.Helper()
	l := must.Get(redislayer.New(c, opts...))(t)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// miniHarness is a harness over one miniredis: each New is a client and a
// layer of its own (with opts); Advance moves miniredis's TTL clock.
func miniHarness(t *testing.T, opts ...redislayer.Option) (storetest.Harness, *miniredis.Miniredis) {
	m := testenv.MiniRedis(t).Mini
	prefix := testenv.Prefix()
	return storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return newLayer(t, c, append([]redislayer.Option{redislayer.WithPrefix(prefix), redislayer.WithTimeout(5 * time.Second)}, opts...)...)
		},
		Advance: func(_ *testing.T, d time.Duration) { m.FastForward(d) },
		Tick:    200 * time.Millisecond,
	}, m
}

// realHarness is a harness over the real Redis, under a prefix of its own
// whose keys are deleted when the test ends.
func realHarness(t *testing.T, opts ...redislayer.Option) storetest.Harness {
	r := testenv.RealRedis(t)
	prefix := testenv.Prefix()
	cleanPrefix(t, r.Options, prefix)
	return storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			o := *r.Options
			o.ContextTimeoutEnabled = true
			c := redis.NewClient(&o)
			t.Cleanup(func() { _ = c.Close() })
			return newLayer(t, c, append([]redislayer.Option{redislayer.WithPrefix(prefix), redislayer.WithTimeout(5 * time.Second)}, opts...)...)
		},
	}
}

// cleanPrefix deletes the keys under prefix when the test ends: only this
// test's keys on a server other packages share.
func cleanPrefix(t testing.TB, o *redis.Options, prefix string) {
	t.Cleanup(func() {
		c := redis.NewClient(o)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				c.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			c.Unlink(ctx, batch...)
		}
	})
}

// counter is a go-redis hook counting the commands a client sends.
type counter struct {
	mu   chan struct{}
	cmds map[string]int
}

func newCounter() *counter { return &counter{mu: make(chan struct{}, 1), cmds: map[string]int{}} }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu <- struct{}{}
		c.cmds[cmd.Name()]++
		<-c.mu
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu <- struct{}{}
		for _, cmd := range cmds {
			c.cmds[cmd.Name()]++
		}
		<-c.mu
		return next(ctx, cmds)
	}
}

// scripts returns the number of scripts run (EVALSHA and EVAL): the
// layer's round trips, leaving out the connection set-up (HELLO, CLIENT).
func (c *counter) scripts() int {
	c.mu <- struct{}{}
	defer func() { <-c.mu }()
	return c.cmds["evalsha"] + c.cmds["eval"]
}
