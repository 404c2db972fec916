package tiered_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/tiered"
)

// deadlines records, per call of a faultlayer, whether its context had a
// deadline.
type deadlines struct {
	mu  sync.Mutex
	got map[string][]bool
}

func (d *deadlines) watch(name string, l *faultlayer.Layer, ms ...faultlayer.Method) {
	for _, m := range ms {
		l.Hook(m, func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			d.mu.Lock()
			d.got[name+" "+m.String()] = append(d.got[name+" "+m.String()], ok)
			d.mu.Unlock()
			return nil
		})
	}
}

// WithTimeouts(0, 0) is no bound of the Store's own: a call to either tier
// made for a caller without a deadline gets none, while by default it gets
// the Store's. The attempts that store a completion stay bounded either way.
func TestZeroTimeoutsAddNoDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []tiered.Option
		want bool
	}{
		{"default", nil, true},
		{"zero", []tiered.Option{tiered.WithTimeouts(0, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, redis := faultlayer.New(newMem(t)), faultlayer.New(newMem(t))
			d := &deadlines{got: map[string][]bool{}}
			d.watch("redis", redis, faultlayer.Reserve)
			d.watch("sql", sql, faultlayer.Reserve, faultlayer.Complete)
			s := newStore(t, append([]tiered.Option{tiered.WithSQL(sql), tiered.WithRedis(redis)}, tc.opts...)...)
			var c counter
			if _, err := s.Do(context.Background(), newKey(t), "fp", c.fn("x")); err != nil || c.runs.Load() != 1 {
				t.Fatalf("Do: %v, runs %d", err, c.runs.Load())
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			for call, want := range map[string]bool{"redis Reserve": tc.want, "sql Reserve": tc.want, "sql Complete": true} {
				got := d.got[call]
				if len(got) == 0 {
					t.Fatalf("no %s call", call)
				}
				for _, ok := range got {
					if ok != want {
						t.Errorf("%s had a deadline: %v, want %v", call, ok, want)
					}
				}
			}
		})
	}
}

// WithRedisFallback(0, 0) never switches Redis off: every call tries it,
// however often it failed, and SQL decides meanwhile.
func TestRedisFallbackZeroNeverSwitchesOff(t *testing.T) {
	sql, redis := faultlayer.New(newMem(t)), faultlayer.New(newMem(t))
	rec := newRecorder()
	s := newStore(t, tiered.WithSQL(sql), tiered.WithRedis(redis), tiered.WithObserver(rec),
		tiered.WithLocalCache(0, 0, 0), tiered.WithRedisFallback(0, 0))
	redis.Down()
	var c counter
	k := newKey(t)
	const calls = 2*tiered.DefaultRedisFailures + 2
	for i := range calls {
		if _, err := s.Do(t.Context(), k, "fp", c.fn("ok")); err != nil {
			t.Fatalf("call %d with Redis down: %v", i, err)
		}
	}
	if c.runs.Load() != 1 {
		t.Fatalf("fn ran %d times", c.runs.Load())
	}
	if n := rec.count("fallback_on"); n != 0 {
		t.Fatalf("fallback_on events: %d, want none", n)
	}
	if n := redis.Calls(faultlayer.Reserve); n != calls {
		t.Fatalf("Redis was asked %d times in %d calls, want every time", n, calls)
	}
}

// The local cache's zero turns it off, whatever its other bounds, and the
// wait's zero is no wait: both are accepted.
func TestZeroCacheAndWaitAreAccepted(t *testing.T) {
	newStore(t, tiered.WithSQL(newMem(t)), tiered.WithLocalCache(0, 0, 0), tiered.WithWait(0))
}
