package idemgrpc_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
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
