package idemgrpc_test

import (
	"errors"
	"runtime"
	"time"

	"github.com/uptrace/bun"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// answered sets the header location and the trailer x-receipt (both
// stored and replayed) and returns the message {v: v}.
func (r *endingRun) answered(v string) (*structpb.Struct, error) {
	r.meta("/"+v, v)
	return resp(v), nil
}

// meta sets the header location and the trailer x-receipt, and a header
// x-other that is not stored. Like most handlers it ignores the error of
// a call whose client is gone.
func (r *endingRun) meta(location, receipt string) {
	_ = grpc.SetHeader(r.ctx, metadata.Pairs("location", location, "x-other", "o"))
	_ = grpc.SetTrailer(r.ctx, metadata.Pairs("x-receipt", receipt))
}

// commitThen completes the reservation with {v: "A"} (its metadata set
// first) in a transaction that commits, then ends as then says.
func (r *endingRun) commitThen(then func() (*structpb.Struct, error)) (*structpb.Struct, error) {
	r.meta("/A", "A")
	if err := r.tx(func(tx bun.IConn) error { return r.complete(tx, resp("A")) }); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return then()
}

var errDeclined = errors.New("the provider declined")

// outliveLease waits, in the atomic mode, until the run has gone half a
// lease past its lease, and checks that the deciding tier saw no renewal
// (the open transaction is the lease).
func (r *endingRun) outliveLease() error {
	select {
	case <-time.After(r.lease * 3 / 2):
	case <-r.ctx.Done():
		return status.FromContextError(r.ctx.Err()).Err()
	}
	select {
	case <-r.renew:
		return status.Error(codes.Internal, "the deciding tier saw a renewal of an atomic execution")
	default:
		return nil
	}
}

// endings are the rows of TestHandlerEndings.
var endings = []ending{
	{
		name:   "returns a message",
		first:  func(r *endingRun) (*structpb.Struct, error) { return r.answered("A") },
		firstV: "A", firstHeader: "/A", firstTrailer: "A",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1,
		atomic: sameAtomic,
	},
	{
		name: "returns a kept error",
		first: func(r *endingRun) (*structpb.Struct, error) {
			r.meta("/A", "A")
			return nil, status.Error(codes.InvalidArgument, "bad amount")
		},
		firstCode: codes.InvalidArgument, firstMsg: "bad amount", firstHeader: "/A", firstTrailer: "A",
		stored: "code:InvalidArgument", storedHeader: "/A", retryCode: codes.InvalidArgument, runs: 1,
		atomic: sameAtomic,
	},
	{
		name: "returns a released error",
		first: func(*endingRun) (*structpb.Struct, error) {
			return nil, status.Error(codes.Unavailable, "provider down")
		},
		firstCode: codes.Unavailable, firstMsg: "provider down",
		retryV: "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name:      "returns nil, nil",
		first:     func(*endingRun) (*structpb.Struct, error) { return nil, nil },
		firstCode: codes.Internal, firstMsg: "no response message",
		retryV: "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name:      "panics before setting metadata",
		first:     func(*endingRun) (*structpb.Struct, error) { panic("boom") },
		firstCode: codes.Internal, firstMsg: "panicked",
		retryV: "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name: "panics after setting metadata",
		first: func(r *endingRun) (*structpb.Struct, error) {
			r.meta("/A", "A")
			panic("boom")
		},
		firstCode: codes.Internal, firstMsg: "panicked",
		retryV: "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name:      "calls runtime.Goexit",
		first:     func(*endingRun) (*structpb.Struct, error) { runtime.Goexit(); return nil, nil },
		firstCode: codes.Internal,
		retryV:    "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name:    "the client gives up mid-run",
		givesUp: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			close(r.started)
			<-r.gone
			return r.answered("A")
		},
		firstCode: codes.DeadlineExceeded,
		stored:    "v:A", storedHeader: "/A", retryV: "A", runs: 1,
		atomic: sameAtomic,
	},
	{
		name:  "works longer than the lease",
		lease: 2 * time.Second,
		first: func(r *endingRun) (*structpb.Struct, error) {
			if r.atomic {
				if err := r.outliveLease(); err != nil {
					return nil, err
				}
			} else {
				for range 4 { // four renewals, a third of the lease apart
					<-r.renew
				}
			}
			r.dup()
			return r.answered("A")
		},
		firstV: "A", firstHeader: "/A", firstTrailer: "A",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1,
		atomic: sameAtomic,
	},
	{
		name:      "loses its lease",
		lease:     600 * time.Millisecond,
		renewLost: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			if r.atomic {
				// The open transaction is the lease: nothing is renewed,
				// so nothing is lost.
				if err := r.outliveLease(); err != nil {
					return nil, err
				}
				return r.answered("A")
			}
			<-r.ctx.Done() // cut off, cause idem.ErrLeaseLost
			return nil, r.ctx.Err()
		},
		firstCode: codes.Aborted, firstMsg: "another owner took",
		retryV: "again", runs: 2,
		atomic: atomicEnding{firstV: "A", firstHeader: "/A", firstTrailer: "A", stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1},
	},
	{
		name: "sets metadata after completing in its transaction",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) {
				r.meta("/late", "late")
				return resp("A"), nil
			})
		},
		firstV: "A", firstHeader: "/A", firstTrailer: "A",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "rolls back before completing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			err := r.tx(func(bun.IConn) error { return errDeclined })
			return nil, status.Error(codes.Unavailable, err.Error())
		},
		firstCode: codes.Unavailable, firstMsg: errDeclined.Error(),
		retryV: "again", runs: 2,
		atomic: sameAtomic,
	},
	{
		name: "rolls back after completing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			err := r.tx(func(tx bun.IConn) error {
				if err := r.complete(tx, resp("A")); err != nil {
					return err
				}
				return errDeclined
			})
			return nil, status.Error(codes.Unavailable, err.Error())
		},
		firstCode: codes.Unavailable, firstMsg: errDeclined.Error(),
		retryV: "again", runs: 2,
		atomic: refusedAtomic,
	},
	{
		name: "rolls back after completing and returns the message",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			_ = r.tx(func(tx bun.IConn) error {
				if err := r.complete(tx, resp("A")); err != nil {
					return err
				}
				return errDeclined
			})
			return r.answered("A")
		},
		firstCode: codes.Internal, firstMsg: "did not commit",
		retryV: "again", runs: 2,
		atomic: refusalIgnoredAtomic,
	},
	{
		name: "its COMMIT fails",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			err := r.tx(func(tx bun.IConn) error {
				// A link to no parent: refused at COMMIT.
				if _, err := r.s.db.NewRaw("INSERT INTO "+r.s.links+" (id, parent) VALUES (?, ?)", r.id, 404).Conn(tx).Exec(r.ctx); err != nil {
					return err
				}
				if r.atomic {
					return nil // the Store completes, and its COMMIT fails
				}
				return r.complete(tx, resp("A"))
			})
			if r.atomic && err == nil {
				return r.answered("A")
			}
			if err == nil {
				return nil, status.Error(codes.Internal, "the COMMIT succeeded")
			}
			return nil, status.Error(codes.Unavailable, err.Error())
		},
		firstCode: codes.Unavailable, firstMsg: "commit",
		retryV: "again", runs: 2,
		atomic: atomicEnding{firstCode: codes.Internal, firstMsg: "did not commit", retryV: "again", runs: 2},
	},
	{
		name: "completes twice with the same bytes",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			r.meta("/A", "A")
			err := r.tx(func(tx bun.IConn) error {
				if err := r.complete(tx, resp("A")); err != nil {
					return err
				}
				return r.complete(tx, resp("A"))
			})
			if err != nil {
				return nil, status.Error(codes.Unavailable, err.Error())
			}
			return resp("A"), nil
		},
		firstV: "A", firstHeader: "/A", firstTrailer: "A",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "returns another message than it completed",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) { return resp("B"), nil })
		},
		firstCode: codes.Internal, firstMsg: "did not return the answer it completed",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "returns an error after committing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) { return nil, status.Error(codes.Unavailable, "late failure") })
		},
		firstCode: codes.Internal, firstMsg: "did not return the answer it completed",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "returns a kept error after committing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) { return nil, status.Error(codes.InvalidArgument, "late refusal") })
		},
		firstCode: codes.Internal, firstMsg: "did not return the answer it completed",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "returns nil, nil after committing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) { return nil, nil })
		},
		firstCode: codes.Internal, firstMsg: "did not return the answer it completed",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
	{
		name: "panics after committing",
		inTx: true,
		first: func(r *endingRun) (*structpb.Struct, error) {
			return r.commitThen(func() (*structpb.Struct, error) { panic("boom") })
		},
		firstCode: codes.Internal, firstMsg: "did not return the answer it completed",
		stored: "v:A", storedHeader: "/A", retryV: "A", runs: 1, charges: 1,
		atomic: refusedAtomic,
	},
}
