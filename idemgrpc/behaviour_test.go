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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// memStore is a Store over the memory layer, closed with the test.
func memStore(t testing.TB, opts ...tiered.Option) *tiered.Store {
	t.Helper()
	mem, err := memlayer.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := tiered.New(append([]tiered.Option{tiered.WithSQL(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// counting returns a handler that counts its runs and answers with the
// run's number and the request's amount.
func counting(runs *atomic.Int64) handlerFunc {
	return func(_ context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		n := runs.Add(1)
		return structpb.NewStruct(map[string]any{"run": float64(n), "amount": req.GetFields()["amount"].GetNumberValue()})
	}
}

func TestReplay(t *testing.T) {
	var runs atomic.Int64
	conn := guarded(t, memStore(t), &service{charge: counting(&runs), refund: counting(&runs)})
	req := msg(t, map[string]any{"amount": 100})

	first := call(t, conn, methodCharge, key("k1"), req)
	second := call(t, conn, methodCharge, key("k1"), req)
	quoted := call(t, conn, methodCharge, key(`"k1"`), req) // RFC 8941 string: the same key
	for _, r := range []reply{first, second, quoted} {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	if first.replayed || !second.replayed || !quoted.replayed {
		t.Errorf("replay marks: first %v, second %v, quoted %v; want false, true, true", first.replayed, second.replayed, quoted.replayed)
	}
	if !proto.Equal(first.resp, second.resp) || !proto.Equal(first.resp, quoted.resp) {
		t.Errorf("answers differ: %v, %v, %v", first.resp, second.resp, quoted.resp)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	// The method is part of the key's scope: the same key on another
	// method is another operation, not a mismatch.
	if r := call(t, conn, methodRefund, key("k1"), req); r.err != nil || r.replayed {
		t.Errorf("the same key on another method: %v, replayed %v", r.err, r.replayed)
	}
	// Without a key the call passes untouched, every time.
	for range 2 {
		if r := call(t, conn, methodCharge, nil, req); r.err != nil || r.replayed {
			t.Errorf("no key: %v, replayed %v", r.err, r.replayed)
		}
	}
	if n := runs.Load(); n != 4 {
		t.Errorf("the handler ran %d times, want 4", n)
	}
}

func TestKeyRules(t *testing.T) {
	var runs atomic.Int64
	store := memStore(t)
	svc := &service{charge: counting(&runs)}
	plain := guarded(t, store, svc)
	required := guarded(t, store, svc, idemgrpc.WithRequire(true))
	req := msg(t, map[string]any{"amount": 1})

	r := call(t, required, methodCharge, nil, req)
	wantProblem(t, r, codes.InvalidArgument, idemgrpc.ReasonKeyMissing, 0)

	for name, vals := range map[string][]string{
		"empty":           {""},
		"blank":           {"  "},
		"too long":        {strings.Repeat("k", 256)},
		"comma when bare": {"a,b"},
		"two values":      {"a", "b"},
		"unterminated":    {`"abc`},
		"data after":      {`"abc";x`},
		"bad escape":      {`"a\b"`},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, v := range vals {
				ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultKeyName, v)
			}
			r := callCtx(ctx, plain, methodCharge, nil, req)
			wantProblem(t, r, codes.InvalidArgument, idemgrpc.ReasonKeyMalformed, 0)
			if strings.Contains(status.Convert(r.err).Message(), "middleware:") {
				t.Errorf("message with a Go package prefix: %q", status.Convert(r.err).Message())
			}
		})
	}
	if r := call(t, plain, methodCharge, key(strings.Repeat("k", 255)), req); r.err != nil {
		t.Errorf("a key of 255 bytes: %v", r.err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1 (the good key)", n)
	}
}

func TestMismatch(t *testing.T) {
	var runs atomic.Int64
	conn := guarded(t, memStore(t), &service{charge: counting(&runs)})
	if r := call(t, conn, methodCharge, key("m"), msg(t, map[string]any{"amount": 100})); r.err != nil {
		t.Fatal(r.err)
	}
	r := call(t, conn, methodCharge, key("m"), msg(t, map[string]any{"amount": 101}))
	wantProblem(t, r, codes.FailedPrecondition, idemgrpc.ReasonMismatch, 0)
	// A noisy field of the default deny-list does not make a new request.
	r = call(t, conn, methodCharge, key("m"), msg(t, map[string]any{"amount": 100, "trace_id": "abc"}))
	if r.err != nil || !r.replayed {
		t.Errorf("the same request with a trace ID: %v, replayed %v", r.err, r.replayed)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// A handler error releases the key (a retry runs again) unless the keep
// policy keeps it, in which case it is replayed with its details.
func TestHandlerErrors(t *testing.T) {
	keepInvalid := idemgrpc.WithKeep(func(s *status.Status) bool { return s.Code() == codes.InvalidArgument })
	badRequest := func() error {
		st, err := status.New(codes.InvalidArgument, "amount must be positive").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "amount", Description: "negative"}}})
		if err != nil {
			panic(err)
		}
		return st.Err()
	}
	t.Run("released", func(t *testing.T) {
		var runs atomic.Int64
		conn := guarded(t, memStore(t), &service{charge: func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
			if runs.Add(1) == 1 {
				return nil, status.Error(codes.Internal, "database down")
			}
			return req, nil
		}}, keepInvalid)
		req := msg(t, map[string]any{"amount": 5})
		r := call(t, conn, methodCharge, key("e"), req)
		if r.code() != codes.Internal || status.Convert(r.err).Message() != "database down" || r.replayed {
			t.Fatalf("first call: %v, replayed %v; want the handler's own error", r.err, r.replayed)
		}
		if r = call(t, conn, methodCharge, key("e"), req); r.err != nil || r.replayed {
			t.Fatalf("retry: %v, replayed %v; want a new run", r.err, r.replayed)
		}
		if r = call(t, conn, methodCharge, key("e"), req); r.err != nil || !r.replayed {
			t.Fatalf("second retry: %v, replayed %v; want the replay", r.err, r.replayed)
		}
		if n := runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2", n)
		}
	})
	t.Run("kept", func(t *testing.T) {
		var runs atomic.Int64
		conn := guarded(t, memStore(t), &service{charge: func(context.Context, *structpb.Struct) (*structpb.Struct, error) {
			runs.Add(1)
			return nil, badRequest()
		}}, keepInvalid)
		req := msg(t, map[string]any{"amount": -5})
		first := call(t, conn, methodCharge, key("kept"), req)
		second := call(t, conn, methodCharge, key("kept"), req)
		if first.replayed || !second.replayed {
			t.Errorf("replay marks %v, %v; want false, true", first.replayed, second.replayed)
		}
		for _, r := range []reply{first, second} {
			if !proto.Equal(status.Convert(r.err).Proto(), status.Convert(badRequest()).Proto()) {
				t.Errorf("answer %v, want the handler's status with its details", status.Convert(r.err).Proto())
			}
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
	t.Run("not a status", func(t *testing.T) {
		var runs atomic.Int64
		conn := guarded(t, memStore(t), &service{charge: func(context.Context, *structpb.Struct) (*structpb.Struct, error) {
			runs.Add(1)
			return nil, errors.New("plain error")
		}}, idemgrpc.WithKeep(func(s *status.Status) bool { return s.Code() == codes.Unknown }))
		req := msg(t, map[string]any{})
		for range 2 {
			r := call(t, conn, methodCharge, key("plain"), req)
			if r.code() != codes.Unknown || status.Convert(r.err).Message() != "plain error" {
				t.Errorf("answer %v, want Unknown: plain error", r.err)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
}

// A duplicate that finds the key in flight past the Store's wait gets
// Aborted with RetryInfo, in the owner's server and in another; once the
// owner is done, a retry gets its answer.
func TestInFlight(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		release := make(chan struct{})
		started := make(chan struct{})
		var runs atomic.Int64
		svc := &service{charge: func(_ context.Context, req *structpb.Struct) (*structpb.Struct, error) {
			if runs.Add(1) == 1 {
				close(started)
			}
			<-release
			return req, nil
		}}
		opts := []idemgrpc.Option{idemgrpc.WithRetryDelays(1500*time.Millisecond, 7*time.Second)}
		owner := guarded(t, st.Store(t, tiered.WithWait(0)), svc, opts...)
		other := guarded(t, st.Store(t, tiered.WithWait(0)), svc, opts...)
		req := msg(t, map[string]any{"amount": 3})
		k := "inflight-" + st.Prefix
		done := make(chan reply)
		go func() { done <- call(t, owner, methodCharge, key(k), req) }()
		<-started
		for name, conn := range map[string]*grpc.ClientConn{"same server": owner, "other server": other} {
			t.Run(name, func(t *testing.T) {
				r := call(t, conn, methodCharge, key(k), req)
				wantProblem(t, r, codes.Aborted, idemgrpc.ReasonInFlight, 1500*time.Millisecond)
			})
		}
		close(release)
		if r := <-done; r.err != nil || r.replayed {
			t.Fatalf("owner: %v, replayed %v", r.err, r.replayed)
		}
		if r := call(t, other, methodCharge, key(k), req); r.err != nil || !r.replayed {
			t.Errorf("retry after the owner: %v, replayed %v", r.err, r.replayed)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
}

// When the deciding tier is down the call fails closed with Unavailable
// and RetryInfo, and the handler never runs.
func TestStoreUnavailable(t *testing.T) {
	mem, err := memlayer.New()
	if err != nil {
		t.Fatal(err)
	}
	sql := faultlayer.New(mem)
	store, err := tiered.New(tiered.WithSQL(sql))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var runs atomic.Int64
	conn := guarded(t, store, &service{charge: counting(&runs)})
	req := msg(t, map[string]any{"amount": 9})

	sql.Down()
	r := call(t, conn, methodCharge, key("down"), req)
	wantProblem(t, r, codes.Unavailable, idemgrpc.ReasonUnavailable, idemgrpc.DefaultUnavailableDelay)
	if n := runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times with the store down", n)
	}
	sql.Up()
	if r := call(t, conn, methodCharge, key("down"), req); r.err != nil || r.replayed {
		t.Errorf("after recovery: %v, replayed %v", r.err, r.replayed)
	}
	// A completion the deciding tier refuses: the handler ran, its answer
	// is not stored; the caller is told so, and is not given success.
	sql.Fail(idem.ErrConfig, faultlayer.Complete)
	r = call(t, conn, methodCharge, key("config"), req)
	wantProblem(t, r, codes.Internal, idemgrpc.ReasonFailed, 0)
}

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
	} {
		t.Run(name, func(t *testing.T) {
			icpt, err := idemgrpc.UnaryServerInterceptor(c.store, c.opts...)
			if !errors.Is(err, idem.ErrConfig) || icpt != nil {
				t.Errorf("got %v, %v; want an error wrapping idem.ErrConfig", icpt != nil, err)
			}
		})
	}
	_, err := idemgrpc.UnaryServerInterceptor(store, idemgrpc.WithFingerprint(fingerprint.WithDeny("a..b")))
	if !errors.Is(err, fingerprint.ErrInvalidPath) {
		t.Errorf("a malformed path: %v, want fingerprint.ErrInvalidPath too", err)
	}
	_, err = idemgrpc.UnaryServerInterceptor(nil, idemgrpc.WithKeep(nil), idemgrpc.WithKeyName(""))
	if msg := err.Error(); !strings.Contains(msg, "UnaryServerInterceptor: give a store") || !strings.Contains(msg, "WithKeep: give ") || !strings.Contains(msg, "WithKeyName: give ") {
		t.Errorf("error %q does not name every fault", msg)
	}
	// A fingerprint option's fault reads under the option that carried it,
	// with the configuration error said once.
	_, err = idemgrpc.UnaryServerInterceptor(store, idemgrpc.WithFingerprint(fingerprint.WithMaxBytes(-1)))
	if want := "idem: configuration error: idemgrpc: WithFingerprint: fingerprint: WithMaxBytes: give "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a fingerprint option's fault reads %v, want it to start %q", err, want)
	}
	if _, err := idemgrpc.UnaryServerInterceptor(store, nil, idemgrpc.WithKeyName("X-Idem-Key"), idemgrpc.WithScope(nil)); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
