package idemgrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// A retried call with the same key gets the first answer; the handler runs
// once. A call without a key is refused when keys are required.
func ExampleUnaryServerInterceptor() {
	mem, err := memlayer.New() // in production: redislayer and sqllayer
	if err != nil {
		log.Fatal(err)
	}
	store, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// Each key is bound to the account that authentication put in the
	// call's context: one account never reads another's answer.
	type accountKey struct{}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md.Get("authorization")) == 0 {
			return nil, status.Error(codes.Unauthenticated, "who are you?")
		}
		account := strings.TrimPrefix(md.Get("authorization")[0], "Bearer token-of-") // your token check
		return next(context.WithValue(ctx, accountKey{}, account), req)
	}
	icpt, err := idemgrpc.UnaryServerInterceptor(store,
		idemgrpc.WithScope(idemgrpc.ScopeFromContext(accountKey{})), idemgrpc.WithRequire(true))
	if err != nil {
		log.Fatal(err)
	}
	runs := 0
	charge := func(_ context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		runs++
		return structpb.NewStruct(map[string]any{"payment": "p-1", "amount": req.GetFields()["amount"].GetNumberValue()})
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, icpt))
	// The service is declared by hand so that the example needs no generated
	// code; a real one registers its generated server instead
	// (pb.RegisterPaymentsServer(srv, impl)), and the interceptor is the same.
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "example.Payments",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Charge",
			Handler: func(impl any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(structpb.Struct)
				if err := dec(in); err != nil {
					return nil, err
				}
				call := func(ctx context.Context, req any) (any, error) { return charge(ctx, req.(*structpb.Struct)) }
				if icpt == nil {
					return call(ctx, in)
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{Server: impl, FullMethod: "/example.Payments/Charge"}, call)
			},
		}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	req, _ := structpb.NewStruct(map[string]any{"amount": 100})
	for _, key := range []string{"order-7", "order-7", ""} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer token-of-acct_1")
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
		}
		var header metadata.MD
		resp := new(structpb.Struct)
		err := conn.Invoke(ctx, "/example.Payments/Charge", req, resp, grpc.Header(&header))
		if err != nil {
			fmt.Println(status.Code(err), status.Convert(err).Message())
			continue
		}
		fmt.Println(resp.AsMap(), "replayed:", header.Get(idemgrpc.ReplayedHeader))
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// map[amount:100 payment:p-1] replayed: []
	// map[amount:100 payment:p-1] replayed: [true]
	// InvalidArgument this call must carry an idempotency key
	// handler runs: 1
}
