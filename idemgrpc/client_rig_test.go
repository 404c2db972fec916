package idemgrpc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/ledger"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/tiered"
)

// grpcCluster is three idemgrpc servers, each with a Store of its own over
// one shared Redis and Postgres, each behind a fault proxy, reached through
// one client connection that sends calls to them in turn; the handler
// counts its executions per key and remembers each answer it made.
type grpcCluster struct {
	proxies [3]*faultproxy.Proxy
	slow    chan struct{} // when set, holds each key's first execution until closed
	started chan string   // each execution's key as it starts; never blocks

	runs    *ledger.Ledger[*structpb.Struct]
	running sync.WaitGroup
}

func newGRPCCluster(t *testing.T, st *stacktest.Stack, storeOpts ...tiered.Option) *grpcCluster {
	t.Helper()
	c := &grpcCluster{runs: ledger.New[*structpb.Struct](), started: make(chan string, 1024)}
	for i := range c.proxies {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(must(t, st.Store(t, storeOpts...))))
		srv.RegisterService(&serviceDesc, &service{charge: c.charge})
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(lis) }()
		t.Cleanup(func() { c.running.Wait(); srv.Stop(); <-done })
		p, err := faultproxy.New(lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		c.proxies[i] = p
	}
	return c
}

func (c *grpcCluster) charge(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	c.running.Add(1)
	defer c.running.Done()
	md, _ := metadata.FromIncomingContext(ctx)
	key := ""
	if v := md.Get(idemgrpc.DefaultKeyName); len(v) == 1 {
		key = v[0]
	}
	first := c.runs.Begin(key)
	slow := c.slow
	select {
	case c.started <- key:
	default:
	}
	if first && slow != nil {
		select {
		case <-slow:
		case <-time.After(20 * time.Second):
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out, err := structpb.NewStruct(map[string]any{"charge": "ch_" + hex.EncodeToString(b), "amount": req.GetFields()["amount"].GetNumberValue()})
	if err != nil {
		return nil, err
	}
	c.runs.Answer(key, out, first)
	return out, nil
}

func (c *grpcCluster) each(fn func(p *faultproxy.Proxy)) {
	for _, p := range c.proxies {
		fn(p)
	}
}

// conn returns a client connection over the three proxies, round robin,
// with idem's client interceptor (options given) and then the inner
// interceptors given (closest to the network).
func (c *grpcCluster) conn(t *testing.T, opts []idemgrpc.Option, inner ...grpc.UnaryClientInterceptor) *grpc.ClientConn {
	t.Helper()
	icpt, err := idemgrpc.UnaryClientInterceptor(append([]idemgrpc.Option{idemgrpc.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
		idemgrpc.WithDeadline(30 * time.Second), idemgrpc.WithRetention(24 * time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := manual.NewBuilderWithScheme("idemtest")
	var addrs []resolver.Address
	for _, p := range c.proxies {
		addrs = append(addrs, resolver.Address{Addr: p.Addr()})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient("idemtest:///payments", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}, MinConnectTimeout: time.Second}),
		grpc.WithChainUnaryInterceptor(append([]grpc.UnaryClientInterceptor{icpt}, inner...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// pay sends one call with key and the amount.
func pay(ctx context.Context, conn *grpc.ClientConn, key string, amount float64) reply {
	req, _ := structpb.NewStruct(map[string]any{"amount": amount})
	return callCtx(ctx, conn, methodCharge, &key, req)
}

// wantOnce checks that key ran once and that r is its stored answer.
func (c *grpcCluster) wantOnce(t *testing.T, key string, r reply) {
	t.Helper()
	runs, answer := c.runs.Of(key)
	if r.err != nil {
		t.Fatalf("%s: %v", key, r.err)
	}
	if runs != 1 || !proto.Equal(r.resp, answer) {
		t.Fatalf("%s: %d executions; got %v, the record holds %v", key, runs, r.resp, answer)
	}
}

// attemptLog records the attempts the interceptor reports.
type attemptLog struct {
	mu   sync.Mutex
	list []idemgrpc.ClientAttempt
	then func(idemgrpc.ClientAttempt)
}

func (l *attemptLog) hook(a idemgrpc.ClientAttempt) {
	l.mu.Lock()
	l.list = append(l.list, a)
	then := l.then
	l.mu.Unlock()
	if then != nil {
		then(a)
	}
}

func (l *attemptLog) get() []idemgrpc.ClientAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]idemgrpc.ClientAttempt(nil), l.list...)
}
