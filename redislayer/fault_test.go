package redislayer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// clientTimeout is the read and write timeout of the fault tests' clients:
// the layer has no timeout of its own, and a call whose caller set no
// deadline is bounded by the client's.
const clientTimeout = 250 * time.Millisecond

// faultBound is how long a call may take against a dead or paused server:
// generous (ten times the client's timeout) so that a loaded machine does
// not fail the test, yet far below go-redis's default read timeout.
const faultBound = 10 * clientTimeout

// serverLayer returns a layer (with opts) on its own client of a
// test-owned server, whose round trips last clientTimeout at most. Its pool
// is larger than the refused dials of a test against a killed server (each
// call and each of go-redis's retries): once refused dials reach the pool
// size, go-redis redials once a second only, answering with the last
// refusal meanwhile, and its redialling goroutine outlives Close by up to
// a second.
func serverLayer(t *testing.T, s *testenv.RedisServer, opts ...redislayer.Option) *redislayer.Layer {
	t.Helper()
	o := s.Options()
	o.ReadTimeout, o.WriteTimeout = clientTimeout, clientTimeout
	o.PoolSize = 100
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return newLayer(t, c, opts...)
}

// readFirst is a layer that reads before it claims whatever the workload;
// a fresh layer of the default order claims first, so the fault tests run
// both.
func readFirst(t *testing.T, s *testenv.RedisServer) *redislayer.Layer {
	return serverLayer(t, s, redislayer.WithReserveOrder(idem.OrderReadFirst))
}

// every runs each operation of the layer once under ctx and returns their
// errors by name.
func every(ctx context.Context, l *redislayer.Layer, k idem.Key, token string) map[string]error {
	_, _, reserve := l.Reserve(ctx, k, "fp", time.Minute, time.Minute)
	_, get := l.Get(ctx, k)
	return map[string]error{
		"Reserve":  reserve,
		"Get":      get,
		"Renew":    l.Renew(ctx, k, token, time.Minute),
		"Complete": l.Complete(ctx, k, token, []byte("x"), time.Minute),
		"Release":  l.Release(ctx, k, token),
		"Fill":     l.Fill(ctx, idem.Record{Key: k, Fingerprint: "fp", State: idem.StateCompleted}, time.Minute),
	}
}

// wantUnavailable checks that every operation failed with ErrUnavailable
// within faultBound each.
func wantUnavailable(t *testing.T, what string, l *redislayer.Layer, k idem.Key, token string) {
	t.Helper()
	start := time.Now()
	errs := every(t.Context(), l, k, token)
	took := time.Since(start)
	for op, err := range errs {
		if !errors.Is(err, idem.ErrUnavailable) {
			t.Errorf("%s: %s: err = %v, want ErrUnavailable", what, op, err)
		}
	}
	if took > time.Duration(len(errs))*faultBound {
		t.Errorf("%s: %d calls took %v, want each within %v", what, len(errs), took, faultBound)
	}
	t.Logf("%s: %d calls failed with ErrUnavailable in %v, e.g. %v", what, len(errs), took, errs["Reserve"])
}

func claimOK(t *testing.T, l *redislayer.Layer, k idem.Key) idem.Record {
	t.Helper()
	rec, claimed, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Minute)
	if err != nil || !claimed {
		t.Fatalf("Reserve: claimed=%v err=%v", claimed, err)
	}
	return rec
}

func TestFaultPausedServer(t *testing.T) {
	s := testenv.StartRedisServer(t)
	l, rl := serverLayer(t, s), readFirst(t, s)
	k := idem.NewKey("fault", "paused")
	rec := claimOK(t, l, k)

	// A call already on the wire when the server stops answering.
	inflight := make(chan error, 1)
	s.Pause()
	go func() {
		_, _, err := l.Reserve(t.Context(), idem.NewKey("fault", "inflight"), "fp", time.Minute, time.Minute)
		inflight <- err
	}()
	wantUnavailable(t, "paused", l, k, rec.Token)
	wantUnavailable(t, "paused, read first", rl, k, rec.Token)
	if err := <-inflight; !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("in-flight Reserve on a paused server: %v, want ErrUnavailable", err)
	} else {
		t.Logf("in-flight Reserve on a paused server: %v", err)
	}

	// The caller's cancellation stays the caller's.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, _, err := l.Reserve(ctx, k, "fp", time.Minute, time.Minute); !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Reserve cancelled by its caller on a paused server: %v, want context.Canceled", err)
	}

	s.Resume()
	// A resumed server first works off what queued while it was stopped:
	// on a loaded machine that can take longer than the layer's timeout.
	// Wait until it answers a read, then write.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := l.Get(t.Context(), k)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get after Resume: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Service is back, with the data: the owner completes its claim.
	if err := l.Complete(t.Context(), k, rec.Token, []byte("after pause"), time.Minute); err != nil {
		t.Fatalf("Complete after Resume: %v", err)
	}
	if got, err := l.Get(t.Context(), k); err != nil || string(got.Result) != "after pause" {
		t.Fatalf("Get after Resume: %+v, %v", got, err)
	}
	if got, claimed, err := rl.Reserve(t.Context(), k, "fp", time.Minute, time.Minute); err != nil || claimed || string(got.Result) != "after pause" {
		t.Fatalf("read-first Reserve after Resume: %+v, claimed %v, %v", got, claimed, err)
	}
}

func TestFaultKilledServer(t *testing.T) {
	s := testenv.StartRedisServer(t)
	l, rl := serverLayer(t, s), readFirst(t, s)
	k := idem.NewKey("fault", "killed")
	rec := claimOK(t, l, k)

	// A call on the wire when the process dies: stopped first, so that the
	// call is surely waiting for an answer when the kill comes.
	s.Pause()
	inflight := make(chan error, 1)
	sent := make(chan struct{})
	go func() {
		close(sent)
		_, _, err := l.Reserve(t.Context(), idem.NewKey("fault", "inflight-kill"), "fp", time.Minute, time.Minute)
		inflight <- err
	}()
	<-sent
	time.Sleep(20 * time.Millisecond) // the Reserve is written and waits for its reply
	s.Kill()
	if err := <-inflight; !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Reserve in flight when the server died: %v, want ErrUnavailable", err)
	} else {
		t.Logf("Reserve in flight when the server died: %v", err)
	}
	wantUnavailable(t, "killed", l, k, rec.Token)
	wantUnavailable(t, "killed, read first", rl, k, rec.Token)

	s.Restart()
	// Service is back, without the data (no persistence): the key is free.
	if err := l.Complete(t.Context(), k, rec.Token, []byte("lost"), time.Minute); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("Complete after a restart lost the claim: %v, want ErrLeaseLost", err)
	}
	claimOK(t, rl, k)
}

func TestFaultMiniredisClosed(t *testing.T) {
	r := testenv.MiniRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Mini.Addr(), ContextTimeoutEnabled: true, PoolSize: 100}) // see serverLayer
	t.Cleanup(func() { _ = c.Close() })
	l := newLayer(t, c)
	k := idem.NewKey("fault", "mini")
	rec := claimOK(t, l, k)
	r.Mini.Close()
	wantUnavailable(t, "miniredis closed", l, k, rec.Token)
}

// TestFaultWaitSurvivesLostSubscription kills the layer's pub/sub connection
// while a waiter waits: go-redis reconnects, the waiter reads again, and the
// completion still reaches it.
func TestFaultWaitSurvivesLostSubscription(t *testing.T) {
	s := testenv.StartRedisServer(t)
	owner, waiter := serverLayer(t, s), serverLayer(t, s)
	k := idem.NewKey("fault", "wait")
	rec := claimOK(t, owner, k)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		r, err := waiter.Wait(ctx, k)
		if err == nil && string(r.Result) != "done" {
			err = errors.New("wrong result " + string(r.Result))
		}
		got <- err
	}()
	admin := redis.NewClient(s.Options())
	defer admin.Close()
	waitSubscribers(t, admin, 1)
	if err := admin.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, admin, 1) // go-redis subscribed again
	if err := owner.Complete(t.Context(), k, rec.Token, []byte("done"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Wait across a lost subscription: %v", err)
	}
}

// TestFaultCloseEndsWait: Close ends a Wait in progress and stops the
// layer's goroutine (TestMain's goleak checks the latter).
func TestFaultCloseEndsWait(t *testing.T) {
	h, m := miniHarness(t)
	owner := h.New(t)
	k := idem.NewKey("fault", "close")
	if _, _, err := owner.Reserve(t.Context(), k, "fp", time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := h.New(t).(*redislayer.Layer)
	got := make(chan error, 1)
	go func() {
		_, err := w.Wait(t.Context(), k)
		got <- err
	}()
	for len(m.PubSubChannels("*")) == 0 { // the waiter subscribed
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Wait ended by Close: %v, want ErrUnavailable and ErrClosed", err)
	}
	if _, err := w.Wait(t.Context(), k); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("Wait after Close: %v, want ErrClosed", err)
	}
}

// waitSubscribers polls CLIENT LIST until the server counts n clients with
// a subscription.
func waitSubscribers(t *testing.T, admin *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := admin.ClientList(t.Context()).Result()
		if err == nil && countSubscribed(list) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never had %d pub/sub clients: %v\n%s", n, err, list)
		}
		time.Sleep(10 * time.Millisecond) // polling the test's own server, not the layer
	}
}

// countSubscribed counts the clients of a CLIENT LIST reply that hold at
// least one channel subscription.
func countSubscribed(list string) int {
	n := 0
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "sub="); ok && v != "0" {
				n++
			}
		}
	}
	return n
}
