package idemgrpc_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/tiered"
)

func realGRPCStack(t *testing.T) *stacktest.Stack {
	t.Helper()
	return stacktest.On(t, "real", testenv.RealRedis(t), testenv.Postgres(t))
}

// loseAnswers is an inner interceptor that lets a call reach the server
// and then reports Unavailable instead of its answer, while lose says so:
// the server committed, the client never heard.
func loseAnswers(lose func() bool) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && lose() {
			return status.Error(codes.Unavailable, "the answer was lost")
		}
		return err
	}
}

// The answer is lost after the server committed: the retry, with the same
// key, receives the stored answer, replayed; the handler ran once.
func TestClientAnswerLost(t *testing.T) {
	c := newGRPCCluster(t, realGRPCStack(t))
	var lost atomic.Bool
	log := &attemptLog{}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook)}, loseAnswers(func() bool { return lost.CompareAndSwap(false, true) }))
	key := testenv.Name("lost")
	r := pay(t.Context(), conn, key, 100)
	c.wantOnce(t, key, r)
	if at := log.get(); len(at) != 2 || !r.replayed || at[1].Key != key {
		t.Fatalf("attempts %+v, replayed %v: want 2 attempts with the caller's key, the second a replay", at, r.replayed)
	}
}

// Every connection is reset and new ones refused before the call reaches
// a server: the retries, with the key minted once, run the handler once,
// once the servers can be reached again.
func TestClientResetBeforeServer(t *testing.T) {
	c := newGRPCCluster(t, realGRPCStack(t))
	log := &attemptLog{}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook), idemgrpc.WithAttempts(50)})
	warm := testenv.Name("warm")
	c.wantOnce(t, warm, pay(t.Context(), conn, warm, 1)) // connected
	c.each(func(p *faultproxy.Proxy) { p.RefuseNew(true); p.ResetAll() })
	log.mu.Lock()
	log.list = nil
	log.then = func(a idemgrpc.ClientAttempt) {
		if a.Number == 2 {
			c.each(func(p *faultproxy.Proxy) { p.RefuseNew(false) })
		}
	}
	log.mu.Unlock()
	// A minted key: none in the metadata, none in the context.
	out := new(structpb.Struct)
	req, _ := structpb.NewStruct(map[string]any{"amount": 100})
	if err := conn.Invoke(t.Context(), methodCharge, req, out); err != nil {
		t.Fatal(err)
	}
	at := log.get()
	if len(at) < 2 {
		t.Fatalf("attempts %+v: want the first to fail", at)
	}
	minted := at[0].Key
	for _, a := range at {
		if a.Key != minted {
			t.Fatalf("attempt %d had key %q, the first %q", a.Number, a.Key, minted)
		}
	}
	c.wantOnce(t, minted, reply{resp: out})
}

// A handler slower than the attempt timeout: the attempt is abandoned, the
// retry with the same key waits for the execution in flight or comes
// again, and receives its answer.
func TestClientSlowerThanAttemptTimeout(t *testing.T) {
	c := newGRPCCluster(t, realGRPCStack(t))
	c.slow = make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c.slow) }) }
	t.Cleanup(release)
	log := &attemptLog{then: func(a idemgrpc.ClientAttempt) {
		if a.Number == 2 {
			release()
		}
	}}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook), idemgrpc.WithAttemptTimeout(300 * time.Millisecond), idemgrpc.WithAttempts(20)})
	key := testenv.Name("slow")
	c.wantOnce(t, key, pay(t.Context(), conn, key, 100))
	at := log.get()
	if len(at) < 2 || !errors.Is(at[1].Cause, idemgrpc.ErrAttemptTimeout) {
		t.Fatalf("attempts %+v: want the first timed out", at)
	}
	for _, a := range at[1:] {
		if code := status.Code(errors.Unwrap(a.Cause)); !errors.Is(a.Cause, idemgrpc.ErrAttemptTimeout) && status.Code(a.Cause) != codes.Aborted {
			t.Fatalf("cause %v (%v): want only timeouts and calls in flight", a.Cause, code)
		}
	}
}

// Aborted while the first call is in flight, with RetryInfo: the client
// waits at least the delay, comes again, and receives the answer.
func TestClientInFlightRetryInfo(t *testing.T) {
	c := newGRPCCluster(t, realGRPCStack(t), tiered.WithWait(50*time.Millisecond))
	c.slow = make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(c.slow) }) }
	t.Cleanup(release)
	log := &attemptLog{then: func(a idemgrpc.ClientAttempt) {
		if status.Code(a.Cause) == codes.Aborted {
			release()
		}
	}}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook), idemgrpc.WithAttemptTimeout(300 * time.Millisecond), idemgrpc.WithAttempts(20)})
	key := testenv.Name("inflight")
	c.wantOnce(t, key, pay(t.Context(), conn, key, 100))
	honoured := false
	for _, a := range log.get() {
		if status.Code(a.Cause) == codes.Aborted {
			if a.Wait < idemgrpc.DefaultInFlightDelay {
				t.Fatalf("attempt %d waited %v after Aborted with RetryInfo %v", a.Number, a.Wait, idemgrpc.DefaultInFlightDelay)
			}
			honoured = true
		}
	}
	if !honoured {
		t.Fatalf("attempts %+v: want an Aborted call in flight among the causes", log.get())
	}
}

// FailedPrecondition (the key reused with another request) and a
// handler's InvalidArgument are not retried.
func TestClientNotRetried(t *testing.T) {
	c := newGRPCCluster(t, realGRPCStack(t))
	log := &attemptLog{}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook)})
	key := testenv.Name("mismatch")
	c.wantOnce(t, key, pay(t.Context(), conn, key, 100))
	log.mu.Lock()
	log.list = nil
	log.mu.Unlock()
	if r := pay(t.Context(), conn, key, 999); r.code() != codes.FailedPrecondition || len(log.get()) != 1 {
		t.Fatalf("payload changed: %v after %d attempts, want FailedPrecondition after 1", r.err, len(log.get()))
	}
	if _, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithDeadline(2*time.Hour), idemgrpc.WithRetention(time.Hour)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("a deadline past the retention: %v", err)
	}
	// A handler's InvalidArgument, and a key the server would refuse.
	inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return status.Error(codes.InvalidArgument, "bad amount")
	}
	log2 := &attemptLog{}
	conn2 := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log2.hook)}, inner)
	if r := pay(t.Context(), conn2, testenv.Name("invalid"), 1); r.code() != codes.InvalidArgument || len(log2.get()) != 1 {
		t.Fatalf("InvalidArgument: %v after %d attempts", r.err, len(log2.get()))
	}
	if r := pay(client.ContextWithKey(t.Context(), ""), conn2, "a,b", 1); r.code() != codes.InvalidArgument || len(log2.get()) != 1 {
		t.Fatalf("a malformed key: %v after %d attempts, want InvalidArgument before any", r.err, len(log2.get()))
	}
}

// N calls, each attempt but the last losing its answer or failing before
// it reaches a server, at random: exactly N executions and N answers, each
// the one its record holds.
func TestClientRandomCutsRunEachOnce(t *testing.T) {
	const n, attempts = 40, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>2))
	c := newGRPCCluster(t, realGRPCStack(t))
	var fault atomic.Int32 // 0 none, 1 lose the answer, 2 fail before the server
	log := &attemptLog{then: func(a idemgrpc.ClientAttempt) {
		f := int32(0)
		if a.Number < attempts {
			f = int32(rng.IntN(3))
		}
		fault.Store(f)
	}}
	inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if fault.Load() == 2 {
			return status.Error(codes.Unavailable, "connection reset")
		}
		return loseAnswers(func() bool { return fault.Load() == 1 })(ctx, method, req, reply, cc, invoker, opts...)
	}
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttemptHook(log.hook), idemgrpc.WithAttempts(attempts)}, inner)
	for i := range n {
		key := testenv.Name("prop")
		c.wantOnce(t, key, pay(t.Context(), conn, key, float64(i)))
	}
	if runs, answers := c.runs.Totals(); runs != n || answers != n {
		t.Fatalf("%d executions and %d answers for %d calls", runs, answers, n)
	}
}

// Redis, a server of the test's own, is killed in the middle of a burst of
// calls: SQL decides alone; every call runs once and receives its answer.
func TestClientRedisKilledMidBurst(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	c := newGRPCCluster(t, stacktest.On(t, "own-redis", &testenv.Redis{Options: srv.Options()}, testenv.Postgres(t)))
	conn := c.conn(t, []idemgrpc.Option{idemgrpc.WithAttempts(10)})
	const n = 30
	keys := make([]string, n)
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range keys {
		keys[i] = testenv.Name("burst")
		wg.Go(func() { replies[i] = pay(t.Context(), conn, keys[i], float64(i)) })
	}
	for range n / 3 {
		<-c.started // a third of the executions began
	}
	srv.Kill()
	wg.Wait()
	srv.Restart() // up again before the Stores close: go-redis redials a dead server after its Close
	for i, k := range keys {
		c.wantOnce(t, k, replies[i])
	}
}
