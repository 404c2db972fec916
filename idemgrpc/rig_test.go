package idemgrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/tiered"
)

// The test service, declared by hand so that no generated code is needed:
// two unary methods over structpb.Struct, each calling the handler of the
// service value it was registered with.
const (
	methodCharge = "/idemtest.Payments/Charge"
	methodRefund = "/idemtest.Payments/Refund"
)

type handlerFunc func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error)

// service holds the handlers of one server.
type service struct {
	charge, refund handlerFunc
}

func unary(fullMethod string, pick func(*service) handlerFunc) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := pick(srv.(*service))
		call := func(ctx context.Context, req any) (any, error) { return h(ctx, req.(*structpb.Struct)) }
		if icpt == nil {
			return call(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, call)
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "idemtest.Payments",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Charge", Handler: unary(methodCharge, func(s *service) handlerFunc { return s.charge })},
		{MethodName: "Refund", Handler: unary(methodRefund, func(s *service) handlerFunc { return s.refund })},
	},
	Metadata: "idemtest.proto",
}

// serve starts a gRPC server on a loopback port with the interceptors
// given, and returns a client connection to it; both end with the test
// (before the Stores the test made earlier are closed).
func serve(t testing.TB, svc *service, icpts ...grpc.UnaryServerInterceptor) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(icpts...))
	srv.RegisterService(&serviceDesc, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-done
	})
	return conn
}

// guarded starts a server whose only interceptor is idem's over store.
func guarded(t testing.TB, store *tiered.Store, svc *service, opts ...idemgrpc.Option) *grpc.ClientConn {
	t.Helper()
	return serve(t, svc, must(t, store, opts...))
}

// reply is what a client sees of one call.
type reply struct {
	resp     *structpb.Struct
	err      error
	header   metadata.MD
	trailer  metadata.MD
	replayed bool
}

func (r reply) code() codes.Code { return status.Code(r.err) }

// call invokes method with the key (none when key is nil) and the request.
func call(t testing.TB, conn *grpc.ClientConn, method string, key *string, req *structpb.Struct) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return callCtx(ctx, conn, method, key, req)
}

func callCtx(ctx context.Context, conn *grpc.ClientConn, method string, key *string, req *structpb.Struct) reply {
	if key != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultKeyName, *key)
	}
	var r reply
	out := new(structpb.Struct)
	r.err = conn.Invoke(ctx, method, req, out, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	if r.err == nil {
		r.resp = out
	}
	r.replayed = len(r.header.Get(idemgrpc.ReplayedHeader)) == 1 && r.header.Get(idemgrpc.ReplayedHeader)[0] == "true"
	return r
}

func key(s string) *string { return &s }

func msg(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reason returns the ErrorInfo reason of err, "" without one, failing
// the test when its domain is not idem's.
func reason(t testing.TB, err error) string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			if ei.GetDomain() != idemgrpc.ErrorDomain {
				t.Errorf("ErrorInfo domain %q, want %q", ei.GetDomain(), idemgrpc.ErrorDomain)
			}
			return ei.GetReason()
		}
	}
	return ""
}

// retryDelay returns the RetryInfo delay of err, or 0 without one.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// wantProblem checks that r is the interceptor's answer of code, reason
// and RetryInfo delay (0: none).
func wantProblem(t testing.TB, r reply, code codes.Code, why string, delay time.Duration) {
	t.Helper()
	if r.code() != code {
		t.Fatalf("code %v (%v), want %v", r.code(), r.err, code)
	}
	if got := reason(t, r.err); got != why {
		t.Errorf("reason %q, want %q", got, why)
	}
	if got := retryDelay(r.err); got != delay {
		t.Errorf("RetryInfo delay %v, want %v", got, delay)
	}
	if r.replayed {
		t.Errorf("a problem marked as a replay")
	}
}

// must returns idem's interceptor over store with opts, failing the test
// on a configuration error. The scope is a single tenant's unless opts
// name one (the last scope given wins).
func must(t testing.TB, store *tiered.Store, opts ...idemgrpc.Option) grpc.UnaryServerInterceptor {
	t.Helper()
	icpt, err := idemgrpc.UnaryServerInterceptor(store, append([]idemgrpc.Option{idemgrpc.WithSingleTenant()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return icpt
}
