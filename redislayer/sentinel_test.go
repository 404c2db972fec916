package redislayer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/storetest"
)

// TestConformanceSentinel runs the suite over failover clients: each layer
// finds the master through Sentinel, as a production client does.
func TestConformanceSentinel(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	rs := testenv.StartRedisSentinel(t)
	h := storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			return newLayer(t, rs.Client(t), redislayer.WithTimeout(5*time.Second))
		},
	}
	suites(t, h)
}

// Timings of TestSentinelFailover. The client's read and write timeouts
// are short so that a call caught by the switch fails fast; the bound
// leaves room for go-redis's retries and a loaded machine. A call that
// outlives the bound would hang a caller whose own deadline is far away.
const (
	sentinelClientTimeout = 2 * time.Second
	sentinelCallBound     = 3 * sentinelClientTimeout
)

// sentinelClient returns a failover client of its own on rs whose round
// trips last sentinelClientTimeout at most, closed when the test ends.
func sentinelClient(t *testing.T, rs *testenv.RedisSentinel) *redis.Client {
	t.Helper()
	o := rs.FailoverOptions()
	o.ReadTimeout, o.WriteTimeout = sentinelClientTimeout, sentinelClientTimeout
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSentinelFailover moves the master under a layer in use, by SENTINEL
// FAILOVER and by killing it, and checks that the same layer, on the same
// failover client, keeps its promises afterwards: completed records replay,
// claimed keys are not claimed again (and their owners can still complete
// them), new keys are claimed on the new master. Calls caught by the switch
// may fail, but only with idem.ErrUnavailable, and never hang.
func TestSentinelFailover(t *testing.T) {
	t.Run("Forced", func(t *testing.T) {
		t.Parallel() // each has servers of its own
		sentinelSwitch(t, (*testenv.RedisSentinel).Failover)
	})
	t.Run("MasterKilled", func(t *testing.T) {
		t.Parallel() // each has servers of its own
		sentinelSwitch(t, (*testenv.RedisSentinel).KillMaster)
	})
}

// sentinelSwitch runs TestSentinelFailover with move, which makes Sentinel
// promote the replica and returns it.
func sentinelSwitch(t *testing.T, move func(*testenv.RedisSentinel, testing.TB) *testenv.RedisServer) {
	rs := testenv.StartRedisSentinel(t)
	c := sentinelClient(t, rs)
	l := newLayer(t, c)

	const n = 10
	var done, held, fresh [n]idem.Key
	var tokens [n]string
	for i := range n {
		done[i] = idem.NewKey("sentinel", fmt.Sprintf("done-%d", i))
		held[i] = idem.NewKey("sentinel", fmt.Sprintf("held-%d", i))
		fresh[i] = idem.NewKey("sentinel", fmt.Sprintf("fresh-%d", i))
		rec := sentinelClaim(t, l, done[i])
		if err := l.Complete(sentinelCtx(t), done[i], rec.Token, sentinelResult(i), time.Minute); err != nil {
			t.Fatalf("Complete %d: %v", i, err)
		}
		tokens[i] = sentinelClaim(t, l, held[i]).Token
	}
	// Replication is asynchronous: what the replica lacks at the switch is
	// lost, so let it catch up first.
	rs.WaitReplicated(t)

	// Traffic through the switch, on the same layer. It is halted at the
	// latest when the test ends, before the layer closes, should a check
	// below stop the test first.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)
	var churn sentinelChurn
	wg.Go(func() { churn.run(t, l, done[:], stop) })

	before := rs.Master(t)
	start := time.Now()
	after := move(rs, t)
	t.Logf("sentinel moved the master from %s to %s in %v", before.Addr(), after.Addr(), time.Since(start))
	// The former master still takes writes as a master until Sentinel
	// converts it, some seconds later; the client stops using it once
	// Sentinel's +switch-master message reaches it. Wait for that rather than
	// race it, so that what is written next lands on the new master.
	sentinelFollow(t, c, after)
	halt()
	churn.report(t)

	for i := range n {
		rec, claimed, err := l.Reserve(sentinelCtx(t), done[i], "fp", time.Minute, time.Minute)
		if err != nil || claimed || !rec.Completed() || string(rec.Result) != string(sentinelResult(i)) {
			t.Errorf("after failover, Reserve of completed key %d: claimed=%v state=%v result=%q err=%v; want a replay",
				i, claimed, rec.State, rec.Result, err)
		}
		rec, claimed, err = l.Reserve(sentinelCtx(t), held[i], "fp", time.Minute, time.Minute)
		if err != nil || claimed || rec.State != idem.StateInProgress {
			t.Errorf("after failover, Reserve of claimed key %d: claimed=%v state=%v err=%v; want in progress, not claimed",
				i, claimed, rec.State, err)
		}
		if err := l.Complete(sentinelCtx(t), held[i], tokens[i], sentinelResult(i), time.Minute); err != nil {
			t.Errorf("after failover, Complete of claimed key %d by its owner: %v", i, err)
		}
		rec = sentinelClaim(t, l, fresh[i])
		if err := l.Complete(sentinelCtx(t), fresh[i], rec.Token, sentinelResult(i), time.Minute); err != nil {
			t.Errorf("after failover, Complete of new key %d: %v", i, err)
		}
	}

	// A client made now asks Sentinel and goes straight to the new master:
	// it sees what the switched client wrote, so that went to the new master
	// and not to the former one, whose writes Sentinel's conversion discards.
	l2 := newLayer(t, sentinelClient(t, rs))
	for i := range n {
		for _, k := range []idem.Key{done[i], held[i], fresh[i]} {
			rec, err := l2.Get(sentinelCtx(t), k)
			if err != nil || !rec.Completed() || string(rec.Result) != string(sentinelResult(i)) {
				t.Errorf("new client: Get %s: state=%v result=%q err=%v; want completed", k.ClientKey(), rec.State, rec.Result, err)
			}
		}
	}
	// Not a check: claims sent to the former master between the replica's
	// promotion and the client's switch are lost, as Redis replication is
	// asynchronous. How many says how wide that window was.
	lost := 0
	for _, k := range churn.claimed {
		if _, err := l2.Get(sentinelCtx(t), k); errors.Is(err, idem.ErrNotFound) {
			lost++
		}
	}
	t.Logf("%d of the %d claims made during the switch are not on the new master", lost, len(churn.claimed))
}

// sentinelCtx bounds one call of TestSentinelFailover by sentinelCallBound.
// Past the bound the call fails with the caller's context.DeadlineExceeded,
// which the checks do not accept as idem.ErrUnavailable.
func sentinelCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), sentinelCallBound)
	t.Cleanup(cancel)
	return ctx
}

func sentinelResult(i int) []byte { return fmt.Appendf(nil, "result-%d", i) }

func sentinelClaim(t *testing.T, l *redislayer.Layer, k idem.Key) idem.Record {
	t.Helper()
	rec, claimed, err := l.Reserve(sentinelCtx(t), k, "fp", time.Minute, time.Minute)
	if err != nil || !claimed {
		t.Fatalf("Reserve: claimed=%v err=%v", claimed, err)
	}
	return rec
}

// sentinelFollow waits until c's commands reach s, the master Sentinel names
// now. go-redis closes every connection to another server when it learns of
// the switch, so one answer from s means the client has moved whole.
func sentinelFollow(t *testing.T, c *redis.Client, s *testenv.RedisServer) {
	t.Helper()
	want := "\ntcp_port:" + s.Addr()[strings.LastIndexByte(s.Addr(), ':')+1:] + "\r\n"
	deadline := time.Now().Add(15 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil && strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failover client did not move to %s within 15s (last error %v)", s.Addr(), err)
		}
		time.Sleep(delay) // between polls of a client still to hear of the switch
	}
}

// sentinelChurn is traffic on a layer while the master moves: replays of
// completed keys and claims of new ones, each call bounded and checked.
type sentinelChurn struct {
	calls, unavailable int
	slowest            time.Duration
	example            error      // one ErrUnavailable, for the log
	bad                []string   // wrong answers, errors other than ErrUnavailable, slow calls
	claimed            []idem.Key // new keys claimed
}

func (ch *sentinelChurn) run(t *testing.T, l *redislayer.Layer, done []idem.Key, stop <-chan struct{}) {
	for round := 0; ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		i := round % len(done)
		ch.call(t, fmt.Sprintf("Get %d", i), func(ctx context.Context) error {
			rec, err := l.Get(ctx, done[i])
			if err == nil && (!rec.Completed() || string(rec.Result) != string(sentinelResult(i))) {
				return fmt.Errorf("state=%v result=%q, want completed %q", rec.State, rec.Result, sentinelResult(i))
			}
			return err
		})
		ch.call(t, fmt.Sprintf("Reserve %d", i), func(ctx context.Context) error {
			rec, claimed, err := l.Reserve(ctx, done[i], "fp", time.Minute, time.Minute)
			if err == nil && (claimed || !rec.Completed()) {
				return fmt.Errorf("claimed=%v state=%v, want a replay", claimed, rec.State)
			}
			return err
		})
		ch.call(t, fmt.Sprintf("Reserve new %d", round), func(ctx context.Context) error {
			k := idem.NewKey("sentinel-churn", fmt.Sprint(round))
			rec, claimed, err := l.Reserve(ctx, k, "fp", time.Minute, time.Minute)
			// A claim whose reply was lost and that go-redis sent again finds
			// its own in-progress record: not claimed, and not wrong.
			if err == nil && !claimed && (rec.State != idem.StateInProgress || rec.Fingerprint != "fp") {
				return fmt.Errorf("claimed=%v state=%v fingerprint=%q on a new key", claimed, rec.State, rec.Fingerprint)
			}
			if claimed {
				ch.claimed = append(ch.claimed, k)
			}
			return err
		})
		time.Sleep(time.Millisecond) // pacing, so the servers keep their share of the CPU
	}
}

func (ch *sentinelChurn) call(t *testing.T, what string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(t.Context(), sentinelCallBound)
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	cancel()
	ch.calls++
	ch.slowest = max(ch.slowest, took)
	switch {
	case took > sentinelCallBound:
		ch.bad = append(ch.bad, fmt.Sprintf("%s took %v (err %v)", what, took, err))
	case errors.Is(err, idem.ErrUnavailable):
		ch.unavailable++
		if ch.example == nil {
			ch.example = err
		}
	case err != nil:
		ch.bad = append(ch.bad, fmt.Sprintf("%s: %v", what, err))
	}
}

// report is called once run has returned.
func (ch *sentinelChurn) report(t *testing.T) {
	t.Helper()
	t.Logf("during the switch: %d calls, %d ErrUnavailable (e.g. %v), slowest %v",
		ch.calls, ch.unavailable, ch.example, ch.slowest)
	for _, b := range ch.bad {
		t.Errorf("during the switch: %s; want success or ErrUnavailable within %v", b, sentinelCallBound)
	}
}
