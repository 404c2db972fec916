package idemgrpc_test

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemkit/idem/idemgrpc"
)

// The client half: every call through the connection gets one key, kept
// across its retries. Pass client.ContextWithKey(ctx, orderID) to a call to
// choose its key.
func ExampleUnaryClientInterceptor() {
	retry, err := idemgrpc.UnaryClientInterceptor(
		idemgrpc.WithAttempts(5),
		idemgrpc.WithDeadline(time.Minute),
		idemgrpc.WithRetention(24*time.Hour), // the server's: the deadline must stay below it
	)
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient("payments.internal:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(retry))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	// conn.Invoke(client.ContextWithKey(ctx, "order-1042"), "/payments.Payments/Charge", req, resp)
}
