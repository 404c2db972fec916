package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// interceptor holds one configuration; its method intercept is the
// grpc.UnaryServerInterceptor.
type interceptor struct {
	store *tiered.Store
	fp    *fingerprint.Builder
	c     config
}

// UnaryServerInterceptor returns a unary server interceptor that runs each
// call carrying an idempotency key once per key through store, across
// every server that shares store's tiers, and answers every duplicate with
// the stored response (see the package documentation for the flow and the
// status codes).
//
//	icpt, err := idemgrpc.UnaryServerInterceptor(store)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recovery, auth, icpt))
//
// A nil store and options given nonsense make it fail with one error that
// names each fault and wraps idem.ErrConfig (a malformed field path also
// wraps fingerprint.ErrInvalidPath).
func UnaryServerInterceptor(store *tiered.Store, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	c := defaults()
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if store == nil {
		errs = append(errs, errors.New("UnaryServerInterceptor: give a store (got nil)"))
	}
	if !c.scoped {
		errs = append(errs, errNoScope)
	}
	// No limit of the interceptor's own: the server's receive limit has
	// bounded the message already. Names match exactly whatever opts say.
	fpOpts := append([]fingerprint.Option{fingerprint.WithMaxBytes(0)}, c.fpOpts...)
	fp, err := fingerprint.New(append(fpOpts, fingerprint.WithCaseSensitiveNames(true))...)
	if err != nil {
		errs = append(errs, idem.NestedConfigError("WithFingerprint", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: idemgrpc: %w", idem.ErrConfig, err)
	}
	i := &interceptor{store: store, fp: fp, c: c}
	return i.intercept, nil
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md[i.c.keyName] // incoming keys are lower case
	if len(vals) == 0 {
		if i.c.require {
			return nil, i.err(probKeyMissing, "")
		}
		return handler(ctx, req)
	}
	clientKey, err := middleware.ParseKeyHeader(vals)
	if err != nil {
		return nil, i.err(probKeyMalformed, clientText(err))
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, i.err(probFailed, "")
	}
	fp, err := Fingerprint(i.fp, info.FullMethod, msg)
	if err != nil {
		p, fromErr := fingerprintProblem(err)
		if fromErr {
			return nil, i.err(p, clientText(err))
		}
		return nil, i.err(p, "")
	}
	scope := info.FullMethod
	if i.c.scope != nil {
		principal := i.c.scope(ctx, info.FullMethod)
		if principal == "" {
			return nil, i.err(probScopeMissing, "")
		}
		// A method name has no space: the first one ends it.
		scope += " " + principal
	}
	x := &execution{i: i, req: req, method: info.FullMethod, handler: handler}
	res, err := i.store.Do(ctx, idem.NewKey(scope, clientKey), fp, x.run)
	return i.answer(ctx, x, res, err)
}

// answer turns what Do returned into the call's answer. An answer that
// carries a handler's result — the first call's as every replay's — is the
// one the Store kept, decoded by send: never the handler's live return
// value, never metadata the stored answer does not hold.
func (i *interceptor) answer(ctx context.Context, x *execution, res tiered.Result, err error) (any, error) {
	if ctx.Err() != nil && err != nil && errors.Is(err, context.Cause(ctx)) {
		return nil, contextStatus(ctx) // the work goes on for the others
	}
	switch {
	case err == nil && x.led && !res.Replayed:
		// This call's handler ran and the Store kept an answer: the one
		// the handler returned, or the one it completed in its own
		// transaction, which stands whatever the handler returned next.
		if !sameAnswer(x.val, res.Value) {
			return nil, i.err(probDiffers, "")
		}
		return i.send(ctx, res.Value, false)
	case res.Value != nil && (err == nil || errors.Is(err, tiered.ErrNotReplayable)):
		// A stored answer, or the answer of the execution this call
		// shared or led (which reaches its callers even when too large to
		// store).
		return i.send(ctx, res.Value, res.Replayed)
	}
	p, handlerErr := failure(err)
	if handlerErr != nil {
		i.markReplay(ctx, res.Replayed)
		return nil, handlerErr
	}
	return nil, i.err(p, "")
}

// send answers with the stored answer v: its response message or kept
// status, and its metadata. replayed says whether the call did not run the
// handler (see markReplay).
func (i *interceptor) send(ctx context.Context, v []byte, replayed bool) (any, error) {
	a, err := decodeAnswer(v)
	if err != nil {
		return nil, i.err(probFailed, "")
	}
	var resp proto.Message
	if a.response != nil {
		// The type is looked up in protoregistry.GlobalTypes, where
		// generated code registers every message it declares.
		if resp, err = a.response.UnmarshalNew(); err != nil {
			return nil, i.err(probFailed, "")
		}
	}
	if len(a.header) > 0 {
		_ = grpc.SetHeader(ctx, a.header)
	}
	if len(a.trailer) > 0 {
		_ = grpc.SetTrailer(ctx, a.trailer)
	}
	i.markReplay(ctx, replayed)
	if a.status != nil {
		return nil, status.ErrorProto(a.status)
	}
	return resp, nil
}

// markReplay sets ReplayedHeader when the call did not run the handler.
// The call's stream refuses it only when the header went out already.
func (i *interceptor) markReplay(ctx context.Context, replayed bool) {
	if replayed && i.c.replayHeader {
		_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, "true"))
	}
}

// clientText turns an error about the client's input into words for the
// client: without the Go package prefixes of the error chain.
func clientText(err error) string {
	s := err.Error()
	for _, prefix := range [...]string{"middleware: ", "fingerprint: ", "idemgrpc: ", "idem: "} {
		s = strings.ReplaceAll(s, prefix, "")
	}
	return s
}
