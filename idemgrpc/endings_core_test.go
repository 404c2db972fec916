package idemgrpc_test

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/uptrace/bun"
)

func init() {
	// The two endings that need the core to require a completion and to refuse
	// a second one with other bytes.

	endings = append(endings,
		ending{
			name: "never completes its reservation",
			inTx: true,
			first: func(r *endingRun) (*structpb.Struct, error) {
				if _, ok := idem.ReservationFrom(r.ctx); !ok {
					return nil, status.Error(codes.Internal, "no reservation")
				}
				return r.answered("A")
			},
			firstCode: codes.Internal,
			retryV:    "again", runs: 2,
			atomic: atomicEnding{firstV: "A", firstHeader: "/A", firstTrailer: "A", stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1},
		},
		ending{
			name: "completes twice with other bytes",
			inTx: true,
			first: func(r *endingRun) (*structpb.Struct, error) {
				r.meta("/A", "A")
				var second error
				err := r.tx(func(tx bun.IConn) error {
					if err := r.complete(tx, resp("A")); err != nil {
						return err
					}
					second = r.complete(tx, resp("B"))
					return nil
				})
				if err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				if second == nil {
					return nil, status.Error(codes.Internal, "the second completion, with other bytes, was accepted")
				}
				return resp("A"), nil
			},
			firstV: "A", firstHeader: "/A", firstTrailer: "A",
			stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
			atomic: refusedAtomic,
		},
	)
}
