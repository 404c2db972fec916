package reliability_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/tiered"
)

// pauser freezes Redis: SIGSTOP on a test-owned server (connections stay
// open, nothing answers), a black hole in a proxy in front of miniredis.
// addr is where nodes must connect for the pause to reach them.
type pauser struct {
	addr          string
	pause, resume func()
}

func (b *backend) pauser(t *testing.T) pauser {
	t.Helper()
	if b.srv != nil {
		return pauser{addr: "", pause: b.srv.Pause, resume: b.srv.Resume}
	}
	p, err := faultproxy.New(b.ropts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return pauser{addr: p.Addr(), pause: func() { p.BlackHole(true) }, resume: func() { p.BlackHole(false) }}
}

// scriptCalls counts the record commands the Redis server itself has run:
// SET (a claim) and the scripts (EVALSHA, EVAL).
func (b *backend) scriptCalls(t *testing.T) int64 {
	t.Helper()
	if b.mini != nil {
		return int64(b.mini.CommandCount())
	}
	info, err := b.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_set" && name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q", line)
		}
		n += c
	}
	return n
}

// TestRedisPausedLongerThanTimeout freezes Redis for longer than the
// Store's Redis timeout. SQL decides alone: every new key runs once and
// lands in SQL, duplicates on another instance replay from SQL. After
// repeated failures the Store switches Redis off (EventFallbackOn) and stops
// calling it; once Redis answers again and the cool-down has passed, one
// probe switches it back on (EventFallbackOff) and Redis serves calls again.
func TestRedisPausedLongerThanTimeout(t *testing.T) {
	eachBackend(t, ownedBackend, func(t *testing.T, b *backend) {
		p := b.pauser(t)
		const cooldown = time.Second
		opts := []nodeOption{withRedisAddr(p.addr), withStore(tiered.WithRedisFallback(3, cooldown), tiered.WithLocalCache(0, 0, 0))}
		a, other := b.node(t, opts...), b.node(t, opts...)
		w := newWork("ok")
		do := func(n *node, k idem.Key) tiered.Result {
			t.Helper()
			r, err := n.Do(t.Context(), k, "fp", w.fn)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			return r
		}
		if r := do(a, newKey(t)); r.Tier != idem.TierSQL {
			t.Fatalf("warm-up call decided by %v", r.Tier)
		}

		p.pause()
		paused := true
		defer func() {
			if paused {
				p.resume()
			}
		}()
		var keys []idem.Key
		var offAt int64 = -1
		skipped := 0
		for i := range 6 {
			k := newKey(t)
			keys = append(keys, k)
			before := a.redis.Calls(faultlayer.Reserve)
			if r := do(a, k); r.Tier != idem.TierSQL || r.Replayed {
				t.Fatalf("call %d while paused: %+v, want a run decided by SQL", i, r)
			}
			if offAt >= 0 && a.redis.Calls(faultlayer.Reserve) == before {
				skipped++ // switched off: not even tried (a call after the cool-down probes it)
			}
			if offAt < 0 && a.events.count("fallback_on") == 1 {
				offAt = int64(i)
			}
			// A duplicate on another instance: its Redis times out too, SQL
			// replays.
			if r := do(other, k); !r.Replayed || r.Tier != idem.TierSQL || string(r.Value) != "ok" {
				t.Fatalf("duplicate %d while paused: %+v, want a SQL replay", i, r)
			}
		}
		if offAt < 0 || a.events.count("fallback_on") != 1 || skipped == 0 {
			t.Fatalf("fallback_on events: %d, calls that skipped Redis: %d; want 1 switch and Redis skipped while off", a.events.count("fallback_on"), skipped)
		}
		if n := w.runs.Load(); n != 1+int64(len(keys)) {
			t.Fatalf("fn ran %d times for %d keys", n, 1+len(keys))
		}
		for _, k := range keys {
			b.requireCompleted(t, k, "ok")
		}

		p.resume()
		paused = false
		serverBefore := b.scriptCalls(t)
		reservesBefore := a.redis.Calls(faultlayer.Reserve)
		// After the cool-down the next call probes Redis and switches it on.
		waitFor(t, "Redis switched back on", func() bool {
			k := newKey(t)
			do(a, k)
			do(other, k)
			return a.events.count("fallback_off") == 1 && other.events.count("fallback_off") == 1
		})
		k := newKey(t)
		if r := do(a, k); r.Tier != idem.TierSQL || r.Replayed {
			t.Fatalf("after resume: %+v", r)
		}
		// The result reaches Redis off the owner's critical path.
		if rec := b.redisCompleted(t, k); string(rec.result) != "ok" {
			t.Fatalf("Redis after resume: %+v; want the result published", rec)
		}
		if r := do(other, k); r.Tier != idem.TierRedis || string(r.Value) != "ok" {
			t.Fatalf("duplicate after resume: %+v, want a Redis replay", r)
		}
		if a.redis.Calls(faultlayer.Reserve) == reservesBefore || b.scriptCalls(t) == serverBefore {
			t.Fatalf("Redis not used after resume: layer reserves %d→%d, server commands %d→%d",
				reservesBefore, a.redis.Calls(faultlayer.Reserve), serverBefore, b.scriptCalls(t))
		}
		t.Logf("%s: switched off after call %d of the pause, %d Redis reserves skipped while off; back on after resume (%d server commands since)",
			b.name, offAt, skipped, b.scriptCalls(t)-serverBefore)

		// Claims sent while the server was frozen are not lost: the server
		// runs them when it wakes, after the caller gave up on them and SQL
		// decided. Such an orphan claim (its lease is the default 30 s) must
		// not make duplicates wait: SQL holds the result, and the duplicate
		// replays it at once.
		orphans := 0
		for _, k := range keys {
			if rec := b.redisRecord(t, k); rec.found && rec.state == idem.StateInProgress {
				orphans++
			}
		}
		impatient := b.node(t, withStore(tiered.WithWait(200*time.Millisecond), tiered.WithLocalCache(0, 0, 0)))
		runs := w.runs.Load()
		for i, k := range keys {
			r, err := impatient.Do(t.Context(), k, "fp", w.fn)
			if err != nil || string(r.Value) != "ok" || !r.Replayed {
				t.Fatalf("duplicate %d after resume: %+v, %v; want the result SQL holds", i, r, err)
			}
			if rec := b.redisCompleted(t, k); rec.state != idem.StateCompleted {
				t.Fatalf("Redis after duplicate %d: %+v; want the result back-filled", i, rec)
			}
		}
		if n := w.runs.Load(); n != runs {
			t.Fatalf("duplicates of completed keys ran fn %d more times", n-runs)
		}
		t.Logf("%s: %d claims sent during the pause were applied when the server woke; every duplicate replayed from SQL",
			b.name, orphans)
	})
}
