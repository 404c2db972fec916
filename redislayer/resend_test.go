package redislayer_test

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/storetest"
)

// twice is a client that runs every script two times and answers with the
// second reply, as go-redis does when the first reply was lost on the
// network after Redis had applied the script.
type twice struct{ redislayer.Client }

func (c twice) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	_ = c.Client.EvalSha(ctx, sha, keys, args...)
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c twice) Process(ctx context.Context, cmd redis.Cmder) error {
	_ = c.Client.Process(ctx, cmd)
	return c.Client.Process(ctx, cmd)
}

func (c twice) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	_ = c.Client.Eval(ctx, script, keys, args...)
	return c.Client.Eval(ctx, script, keys, args...)
}

func (c twice) Pipeline() redis.Pipeliner { return twicePipe{c.Client.Pipeline()} }

// twicePipe is a pipeline that runs its commands two times, as go-redis
// re-sends a pipeline whose replies were lost.
type twicePipe struct{ redis.Pipeliner }

func (p twicePipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	cmds := slices.Clone(p.Cmds())
	_, _ = p.Pipeliner.Exec(ctx)
	_ = p.Pipeliner.BatchProcess(ctx, cmds...)
	return p.Pipeliner.Exec(ctx)
}

// TestConformanceResent runs the suite with every script applied twice: a
// claim re-sent stays claimed by its caller, a Complete re-sent succeeds
// without change, a Release re-sent finds nothing to release.
func TestConformanceResent(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	for _, o := range fixedOrders {
		t.Run(o.String(), func(t *testing.T) {
			m := testenv.MiniRedis(t).Mini
			h := storetest.Harness{
				New: func(t *testing.T) idem.Layer {
					c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
					t.Cleanup(func() { _ = c.Close() })
					return newLayer(t, twice{c}, redislayer.WithTimeout(5*time.Second), redislayer.WithReserveOrder(o))
				},
				Advance: func(_ *testing.T, d time.Duration) { m.FastForward(d) },
				Tick:    200 * time.Millisecond,
				Keys:    100,
			}
			storetest.Run(t, h)
			storetest.RunFiller(t, h)
		})
	}
}

// oldServer is a client of a Redis before 7.0, which refuses SET with both
// NX and GET as a syntax error.
type oldServer struct {
	redislayer.Client
	refused *atomic.Int32
}

// redisError is an error reply, as go-redis reports one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// refuse answers SET with NX and GET as a Redis before 7.0 does.
func (c oldServer) refuse(cmd redis.Cmder) bool {
	if cmd.Name() != "set" || !slices.Contains(cmd.Args(), any("get")) {
		return false
	}
	c.refused.Add(1)
	cmd.SetErr(redisError("ERR syntax error"))
	return true
}

func (c oldServer) Process(ctx context.Context, cmd redis.Cmder) error {
	if c.refuse(cmd) {
		return cmd.Err()
	}
	return c.Client.Process(ctx, cmd)
}

func (c oldServer) Pipeline() redis.Pipeliner { return oldPipe{c.Client.Pipeline(), c} }

// oldPipe is a pipeline to a Redis before 7.0: SET with NX and GET fails,
// the other commands run.
type oldPipe struct {
	redis.Pipeliner
	server oldServer
}

func (p oldPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	cmds := slices.Clone(p.Cmds())
	p.Discard()
	var err error
	for _, cmd := range cmds {
		if p.server.refuse(cmd) {
			err = cmp.Or(err, cmd.Err())
			continue
		}
		_ = p.Pipeliner.Process(ctx, cmd)
	}
	_, perr := p.Pipeliner.Exec(ctx)
	return cmds, cmp.Or(err, perr)
}

// TestConformanceOldServer: on a server that refuses NX with GET, Reserve
// falls back to reserve.lua for good after the first refusal.
func TestConformanceOldServer(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	m := testenv.MiniRedis(t).Mini
	var refused atomic.Int32
	h := storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return newLayer(t, oldServer{c, &refused}, redislayer.WithTimeout(5*time.Second))
		},
		Advance: func(_ *testing.T, d time.Duration) { m.FastForward(d) },
		Tick:    200 * time.Millisecond,
		Keys:    100,
	}
	storetest.Run(t, h)
	if n := refused.Load(); n == 0 {
		t.Fatal("the old-server client was never asked for SET NX GET")
	}
}
