package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/middleware"
)

// ErrAttemptTimeout is the cause of a retry after an attempt that had no
// answer within WithAttemptTimeout.
var ErrAttemptTimeout = errors.New("idemgrpc: attempt timed out")

// UnaryClientInterceptor returns the client half of the interceptor: each
// call gets one idempotency key in its outgoing metadata (WithKeyName) and
// is retried with that same key while a retry can help.
//
// The key is the caller's: outgoing metadata that already carries one, or
// client.ContextWithKey; else one is minted (client.NewKey) before the
// first attempt. A key the server would refuse fails the call with
// InvalidArgument before anything is sent. Install it on the connections
// (or with grpc.WithChainUnaryInterceptor) whose calls must run once.
//
// Retried: Unavailable, ResourceExhausted (but not a request the server
// cannot fingerprint), Aborted (a call in flight, or its lease lost), and
// DeadlineExceeded while the caller's own context is alive (the attempt's
// deadline, WithAttemptTimeout, ended it, on either side), after the
// status's RetryInfo delay when it has one, else exponential backoff with
// full jitter (WithBackoff). Never retried: FailedPrecondition (the key
// reused with another request, or an answer not replayable),
// InvalidArgument and every other code, and a call whose context ended.
// Attempts are bounded by WithAttempts and the whole call by WithDeadline,
// which New refuses at or above WithRetention.
//
// Of the package's other options only WithKeyName applies here.
func UnaryClientInterceptor(opts ...Option) (grpc.UnaryClientInterceptor, error) {
	c := defaults()
	c.cl = clientDefaults()
	var errs []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cl.retention > 0 && c.cl.deadline >= c.cl.retention {
		errs = append(errs, fmt.Errorf("WithDeadline: give a deadline below the server's retention %v (got %v): a retry after the record expired runs the call again", c.cl.retention, c.cl.deadline))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: idemgrpc: %w", idem.ErrConfig, err)
	}
	ci := &clientInterceptor{keyName: c.keyName, c: c.cl}
	return ci.invoke, nil
}

type clientInterceptor struct {
	keyName string
	c       clientConfig
}

func (ci *clientInterceptor) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	md, _ := metadata.FromOutgoingContext(ctx)
	vals := md.Get(ci.keyName)
	key := ""
	switch {
	case len(vals) > 0:
		key = vals[0]
		if _, err := middleware.ParseKeyHeader(vals); err != nil {
			return status.Errorf(codes.InvalidArgument, "idemgrpc: the call's idempotency key would be refused: %v", err)
		}
	default:
		k, ok := client.KeyFromContext(ctx)
		if !ok {
			k = client.NewKey()
		}
		if _, err := middleware.ParseKeyHeader([]string{k}); err != nil {
			return status.Errorf(codes.InvalidArgument, "idemgrpc: the call's idempotency key would be refused: %v", err)
		}
		key = k
		ctx = metadata.AppendToOutgoingContext(ctx, ci.keyName, k)
	}
	deadline := time.Now().Add(ci.c.deadline)
	var (
		wait  time.Duration
		cause error
	)
	for n := 1; ; n++ {
		if ci.c.onAttempt != nil {
			ci.c.onAttempt(ClientAttempt{FullMethod: method, Key: key, Number: n, Wait: wait, Cause: cause})
		}
		actx, cancel := context.WithTimeoutCause(ctx, min(ci.c.attemptTimeout, time.Until(deadline)), ErrAttemptTimeout)
		err := invoker(actx, method, req, reply, cc, opts...)
		// The attempt timed out when its own deadline ended it, whichever
		// side saw that first: the server, which knows the deadline the
		// call carried, may answer DeadlineExceeded before this side's
		// timer has fired on a busy machine. The caller's context alive,
		// no other deadline is in play.
		timedOut := ctx.Err() == nil && (errors.Is(context.Cause(actx), ErrAttemptTimeout) || status.Code(err) == codes.DeadlineExceeded)
		cancel()
		if err == nil || ctx.Err() != nil || n >= ci.c.attempts {
			return err
		}
		var again bool
		again, wait = ci.judge(err, timedOut, n)
		if !again || time.Now().Add(wait).After(deadline) {
			return err
		}
		cause = err
		if timedOut {
			cause = fmt.Errorf("%w: %w", ErrAttemptTimeout, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
}

// judge is the retry table of one failed attempt: whether to retry, and
// after how long.
func (ci *clientInterceptor) judge(err error, timedOut bool, n int) (bool, time.Duration) {
	st := status.Convert(err)
	reason, delay := "", time.Duration(-1)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == ErrorDomain {
				reason = d.GetReason()
			}
		case *errdetails.RetryInfo:
			delay = d.GetRetryDelay().AsDuration()
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.Aborted:
	case codes.ResourceExhausted:
		if reason == ReasonRequestInvalid {
			return false, 0 // too large to fingerprint: the same message is again
		}
	case codes.DeadlineExceeded:
		if !timedOut {
			return false, 0
		}
	default:
		return false, 0
	}
	b := ci.c.backoff
	for i := 1; i < n && b < ci.c.cap; i++ {
		b *= 2
	}
	jitter := rand.N(min(b, ci.c.cap) + 1)
	if delay >= 0 {
		return true, delay + rand.N(ci.c.backoff/4+1)
	}
	return true, jitter
}
