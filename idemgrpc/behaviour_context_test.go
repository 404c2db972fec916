package idemgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/tiered"
)

// The interceptor's behaviour past the handler's answer: panics, the
// context and metadata the handler sees, and the options New refuses.

// A panicking handler, behind a common recovery interceptor, runs once
// for the call and for every duplicate that shared its execution; the
// key is released, so only a later retry runs it again.
func TestPanic(t *testing.T) {
	var recovered atomic.Int64
	rec := recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(p any) error {
		recovered.Add(1)
		return status.Errorf(codes.Internal, "recovered: %v", p)
	}))
	t.Run("recovery outside", func(t *testing.T) {
		var runs, told atomic.Int64
		const callers = 5
		var arrivals atomic.Int32
		allIn := make(chan struct{})
		count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if arrivals.Add(1) == callers {
				close(allIn)
			}
			return h(ctx, req)
		}
		store := memStore(t)
		icpt := must(t, store, idemgrpc.WithPanicHandler(func(_ context.Context, method string, p *tiered.PanicError) {
			if method != methodCharge || p.Value != "boom" || len(p.Stack) == 0 {
				t.Errorf("panic handler told %s, %v", method, p.Value)
			}
			told.Add(1)
		}))
		conn := serve(t, &service{charge: func(context.Context, *structpb.Struct) (*structpb.Struct, error) {
			runs.Add(1)
			<-allIn
			panic("boom")
		}}, rec, count, icpt)
		req := msg(t, map[string]any{"amount": 1})
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				r := call(t, conn, methodCharge, key("p"), req)
				if r.code() != codes.Internal || reason(t, r.err) != idemgrpc.ReasonFailed {
					t.Errorf("answer %v, want Internal %s", r.err, idemgrpc.ReasonFailed)
				}
			})
		}
		wg.Wait()
		// Callers that joined the execution share its panic; one that
		// reached the Store only after the release (a slow scheduler can
		// hold a goroutine between the interceptors) runs its own. Either
		// way each run is one execution: the panic handler hears each run
		// once, and no call runs the handler twice.
		first := runs.Load()
		if first < 1 || first > callers {
			t.Errorf("the handler ran %d times for %d concurrent calls", first, callers)
		}
		if n := told.Load(); n != first {
			t.Errorf("the panic handler was told %d times for %d runs", n, first)
		}
		if n := recovered.Load(); n != 0 {
			t.Errorf("the recovery interceptor saw %d panics: none reaches it", n)
		}
		// Released: a retry runs the handler again (and panics again).
		if r := call(t, conn, methodCharge, key("p"), req); r.code() != codes.Internal {
			t.Errorf("retry: %v", r.err)
		}
		if n := runs.Load(); n != first+1 {
			t.Errorf("the handler ran %d times after a retry, want %d", n, first+1)
		}
	})
	t.Run("recovery inside", func(t *testing.T) {
		recovered.Store(0)
		var runs atomic.Int64
		conn := serve(t, &service{charge: func(context.Context, *structpb.Struct) (*structpb.Struct, error) {
			runs.Add(1)
			panic("boom")
		}}, must(t, memStore(t)), rec)
		req := msg(t, map[string]any{"amount": 1})
		r := call(t, conn, methodCharge, key("p"), req)
		if r.code() != codes.Internal || status.Convert(r.err).Message() != "recovered: boom" {
			t.Errorf("answer %v, want the recovery interceptor's", r.err)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := recovered.Load(); n != 1 {
			t.Errorf("the recovery interceptor saw %d panics, want 1", n)
		}
	})
}

type ctxKey struct{}

// The handler runs with the Store's work context: the call's values (of
// earlier interceptors, incoming metadata) but not its cancellation, so a
// client that gives up does not abort the work its retry will look for.
func TestHandlerContext(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int64
	var sawValue, sawMD atomic.Value
	var ctxErr atomic.Value
	svc := &service{charge: func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		runs.Add(1)
		sawValue.Store(ctx.Value(ctxKey{}))
		md, _ := metadata.FromIncomingContext(ctx)
		sawMD.Store(strings.Join(md.Get("x-tenant"), ","))
		close(started)
		<-release
		ctxErr.Store(fmt.Sprint(ctx.Err()))
		return req, nil
	}}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(context.WithValue(ctx, ctxKey{}, "tenant-7"), req)
	}
	store := memStore(t)
	var tenants []string
	var mu sync.Mutex
	conn := serve(t, svc, auth, must(t, store, idemgrpc.WithScope(func(ctx context.Context, method string) string {
		mu.Lock()
		defer mu.Unlock()
		tenants = append(tenants, ctx.Value(ctxKey{}).(string)+" "+method)
		return ctx.Value(ctxKey{}).(string)
	})))
	req := msg(t, map[string]any{"amount": 4})

	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "t7"))
	first := make(chan reply)
	go func() { first <- callCtx(ctx, conn, methodCharge, key("c"), req) }()
	<-started
	cancel()
	if r := <-first; r.code() != codes.Canceled {
		t.Fatalf("cancelled call: %v", r.err)
	}
	close(release)
	// The retry waits for the work, which goes on, and gets its answer.
	r := call(t, conn, methodCharge, key("c"), req)
	if r.err != nil || !r.replayed || !proto.Equal(r.resp, req) {
		t.Fatalf("retry: %v, %v, replayed %v", r.resp, r.err, r.replayed)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if v := sawValue.Load(); v != "tenant-7" {
		t.Errorf("the handler saw the value %v, want tenant-7", v)
	}
	if v := sawMD.Load(); v != "t7" {
		t.Errorf("the handler saw the metadata %q, want t7", v)
	}
	if v := ctxErr.Load(); v != "<nil>" {
		t.Errorf("the handler's context ended with its client: %v", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tenants) != 2 || tenants[0] != "tenant-7 "+methodCharge {
		t.Errorf("the scope function saw %q", tenants)
	}
}

// Metadata named by WithReplayMetadata is stored and replayed; other
// metadata the handler sets reaches no call, its own included.
func TestReplayMetadata(t *testing.T) {
	var runs atomic.Int64
	conn := guarded(t, memStore(t), &service{charge: func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		runs.Add(1)
		if err := grpc.SetHeader(ctx, metadata.Pairs("location", "/payments/1", "x-attempt", "a1")); err != nil {
			return nil, err
		}
		if err := grpc.SetTrailer(ctx, metadata.Pairs("x-ledger-bin", "\x00\x01", "x-cost", "3")); err != nil {
			return nil, err
		}
		return req, nil
	}}, idemgrpc.WithReplayMetadata("Location", "x-ledger-bin"))
	req := msg(t, map[string]any{"amount": 2})
	first := call(t, conn, methodCharge, key("md"), req)
	second := call(t, conn, methodCharge, key("md"), req)
	if first.err != nil || second.err != nil {
		t.Fatal(first.err, second.err)
	}
	if got := first.header.Get("x-attempt"); len(got) != 0 {
		t.Errorf("a header not named reached the first call, which no retry gets: %v", got)
	}
	if got := first.trailer.Get("x-cost"); len(got) != 0 {
		t.Errorf("a trailer not named reached the first call, which no retry gets: %v", got)
	}
	for name, r := range map[string]reply{"first": first, "replay": second} {
		if got := r.header.Get("location"); len(got) != 1 || got[0] != "/payments/1" {
			t.Errorf("%s: location %v", name, got)
		}
		if got := r.trailer.Get("x-ledger-bin"); len(got) != 1 || got[0] != "\x00\x01" {
			t.Errorf("%s: x-ledger-bin %q", name, got)
		}
	}
	if got := second.header.Get("x-attempt"); len(got) != 0 {
		t.Errorf("a header not named was replayed: %v", got)
	}
	if got := second.trailer.Get("x-cost"); len(got) != 0 {
		t.Errorf("a trailer not named was replayed: %v", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

func TestConfig(t *testing.T) {
	store := memStore(t)
	for name, c := range map[string]struct {
		store *tiered.Store
		opts  []idemgrpc.Option
	}{
		"nil store":             {nil, nil},
		"empty key name":        {store, []idemgrpc.Option{idemgrpc.WithKeyName("")}},
		"reserved key name":     {store, []idemgrpc.Option{idemgrpc.WithKeyName("grpc-key")}},
		"binary key name":       {store, []idemgrpc.Option{idemgrpc.WithKeyName("key-bin")}},
		"invalid key name":      {store, []idemgrpc.Option{idemgrpc.WithKeyName("idempotency key")}},
		"nil keep":              {store, []idemgrpc.Option{idemgrpc.WithKeep(nil)}},
		"zero retry delay":      {store, []idemgrpc.Option{idemgrpc.WithRetryDelays(0, time.Second)}},
		"negative retry delay":  {store, []idemgrpc.Option{idemgrpc.WithRetryDelays(time.Second, -1)}},
		"reserved replay name":  {store, []idemgrpc.Option{idemgrpc.WithReplayMetadata("grpc-status")}},
		"replay marker name":    {store, []idemgrpc.Option{idemgrpc.WithReplayMetadata(idemgrpc.ReplayedHeader)}},
		"invalid replay name":   {store, []idemgrpc.Option{idemgrpc.WithReplayMetadata("a b")}},
		"malformed field path":  {store, []idemgrpc.Option{idemgrpc.WithFingerprint(fingerprint.WithDeny("a..b"))}},
		"negative fingerprint ": {store, []idemgrpc.Option{idemgrpc.WithFingerprint(fingerprint.WithMaxBytes(-1))}},
		"nil scope":             {store, []idemgrpc.Option{idemgrpc.WithScope(nil)}},
	} {
		t.Run(name, func(t *testing.T) {
			icpt, err := idemgrpc.UnaryServerInterceptor(c.store, append([]idemgrpc.Option{idemgrpc.WithSingleTenant()}, c.opts...)...)
			if !errors.Is(err, idem.ErrConfig) || icpt != nil {
				t.Errorf("got %v, %v; want an error wrapping idem.ErrConfig", icpt != nil, err)
			}
		})
	}
	_, err := idemgrpc.UnaryServerInterceptor(store, idemgrpc.WithSingleTenant(), idemgrpc.WithFingerprint(fingerprint.WithDeny("a..b")))
	if !errors.Is(err, fingerprint.ErrInvalidPath) {
		t.Errorf("a malformed path: %v, want fingerprint.ErrInvalidPath too", err)
	}
	_, err = idemgrpc.UnaryServerInterceptor(nil, idemgrpc.WithKeep(nil), idemgrpc.WithKeyName(""))
	if msg := err.Error(); !strings.Contains(msg, "UnaryServerInterceptor: give a store") || !strings.Contains(msg, "WithKeep: give ") || !strings.Contains(msg, "WithKeyName: give ") {
		t.Errorf("error %q does not name every fault", msg)
	}
	// A fingerprint option's fault reads under the option that carried it,
	// with the configuration error said once.
	_, err = idemgrpc.UnaryServerInterceptor(store, idemgrpc.WithSingleTenant(), idemgrpc.WithFingerprint(fingerprint.WithMaxBytes(-1)))
	if want := "idem: configuration error: idemgrpc: WithFingerprint: fingerprint: WithMaxBytes: give "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a fingerprint option's fault reads %v, want it to start %q", err, want)
	}
	if _, err := idemgrpc.UnaryServerInterceptor(store); !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "WithSingleTenant()") {
		t.Errorf("no scope: %v, want an error wrapping idem.ErrConfig that names WithScope and WithSingleTenant", err)
	}
	if _, err := idemgrpc.UnaryServerInterceptor(store, nil, idemgrpc.WithKeyName("X-Idem-Key"), idemgrpc.WithSingleTenant()); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
