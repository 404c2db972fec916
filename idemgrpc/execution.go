package idemgrpc

import (
	"context"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// execution is one keyed call's work, handed to the Store. Only the call
// whose work the Store runs fills led and val; it reads them only when Do
// returned that work's outcome, which the Store hands over after the work
// has returned (or panicked).
type execution struct {
	i       *interceptor
	req     any
	method  string
	handler grpc.UnaryHandler

	led bool   // the Store ran this call's work
	val []byte // the encoding of the answer the handler returned; nil when none is kept
}

// handlerFailed is the work's error for a handler error the policy did not
// keep: the Store releases the key and hands it to every call of the
// execution, which answer with err as the handler returned it.
type handlerFailed struct{ err error }

func (e *handlerFailed) Error() string { return "idemgrpc: handler failed: " + e.err.Error() }
func (e *handlerFailed) Unwrap() error { return e.err }

// run is the Store's work: the handler, under the Store's work context
// (the caller's values, not its cancellation), then its answer encoded for
// keeping.
func (x *execution) run(ctx context.Context) ([]byte, error) {
	x.led = true
	// The handler's metadata goes through the recorder, so that the call
	// gets only what the record holds, as every replay does.
	rec := &recorder{allow: x.i.c.replayMD, method: x.method}
	ctx = grpc.NewContextWithServerTransportStream(ctx, rec)
	if x.i.c.onPanic != nil {
		defer x.tellPanic(ctx)
	}
	if res, ok := idem.ReservationFrom(ctx); ok {
		// A handler that takes its reservation answers only through a
		// completion in its transaction: one that returns without a
		// completion that committed has committed nothing (Internal, the
		// key released, the retry runs).
		res.RequireCompletion()
	}
	resp, err := x.handler(ctx, x.req)
	a := answer{header: rec.header, trailer: rec.trailer}
	if err != nil {
		st := status.Convert(err)
		if !x.i.c.keep(st) {
			return nil, &handlerFailed{err: err}
		}
		a.status = st.Proto()
		v, encErr := a.encode()
		if encErr != nil {
			return nil, fmt.Errorf("idemgrpc: keeping the handler's status: %w", encErr)
		}
		x.val = v
		return v, nil
	}
	m, ok := resp.(proto.Message)
	if !ok || !validMessage(m) {
		return nil, fmt.Errorf("%w: the handler's response is %T", errNotProto, resp)
	}
	if a.response, err = asAny(m); err != nil {
		return nil, fmt.Errorf("idemgrpc: keeping the handler's response: %w", err)
	}
	v, err := a.encode()
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: keeping the handler's response: %w", err)
	}
	x.val = v
	return v, nil
}

// validMessage reports whether m is a message value, not a typed nil.
func validMessage(m proto.Message) bool {
	if m == nil {
		return false
	}
	var r protoreflect.Message = m.ProtoReflect()
	return r != nil && r.IsValid()
}

// tellPanic, deferred around the handler, tells the panic handler of a
// panic and panics again with the same value, for the Store to recover
// and release the key.
func (x *execution) tellPanic(ctx context.Context) {
	v := recover()
	if v == nil {
		return
	}
	x.i.c.onPanic(ctx, x.method, &tiered.PanicError{Value: v, Stack: debug.Stack()})
	panic(v)
}
