package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/tiered"
)

// DefaultKeyName is the incoming metadata key that carries the client's
// idempotency key unless WithKeyName names another.
const DefaultKeyName = "idempotency-key"

// ReplayedHeader is the response header metadata key set, with the value
// "true", on every answer that did not run the handler: a stored response
// or status, or the answer of an execution this call shared.
const ReplayedHeader = "idempotent-replayed"

// The default delays of the RetryInfo detail (see WithRetryDelays).
const (
	DefaultInFlightDelay    = time.Second
	DefaultUnavailableDelay = 5 * time.Second
)

// Option configures the interceptor. Options apply in order after the
// defaults; one given nonsense makes UnaryServerInterceptor fail, with an
// error that says, under the option's name, what to give instead.
type Option func(*config) error

type config struct {
	keyName      string
	require      bool
	scope        func(ctx context.Context, fullMethod string) string
	scoped       bool // WithScope or WithSingleTenant was given
	fpOpts       []fingerprint.Option
	keep         func(*status.Status) bool
	inFlight     time.Duration
	unavailable  time.Duration
	replayHeader bool
	replayMD     map[string]bool // lower-case names; nil: none
	onPanic      func(ctx context.Context, fullMethod string, p *tiered.PanicError)
	cl           clientConfig // UnaryClientInterceptor's own (client_options.go)
}

func defaults() config {
	return config{
		keyName:      DefaultKeyName,
		keep:         keepNone,
		inFlight:     DefaultInFlightDelay,
		unavailable:  DefaultUnavailableDelay,
		replayHeader: true,
	}
}

// keepNone is the default keep policy: no handler error is kept, so a
// retry after any error runs the handler again.
func keepNone(*status.Status) bool { return false }

// WithKeyName sets the incoming metadata key that carries the idempotency
// key. Default: DefaultKeyName ("idempotency-key"). Metadata keys are
// case-insensitive; the name is used in lower case. "" , a name that is
// not a valid metadata key (ASCII letters, digits, '-', '_' and '.'), a
// binary key (ending in "-bin") and a name reserved by gRPC (starting with
// "grpc-") are errors.
func WithKeyName(name string) Option {
	return func(c *config) error {
		n := strings.ToLower(name)
		switch {
		case n == "":
			return errors.New("WithKeyName: give a metadata key (got \"\")")
		case strings.HasPrefix(n, "grpc-"):
			return fmt.Errorf("WithKeyName: give a name that gRPC does not reserve, not starting grpc- (got %q)", name)
		case strings.HasSuffix(n, "-bin"):
			return fmt.Errorf("WithKeyName: give a name not ending -bin: a binary metadata key cannot carry a printable key (got %q)", name)
		case !metadataKey(n):
			return fmt.Errorf("WithKeyName: give a metadata key of ASCII letters, digits, '-', '_' and '.' (got %q)", name)
		}
		c.keyName = n
		return nil
	}
}

// metadataKey reports whether n, in lower case, is a metadata key gRPC
// accepts.
func metadataKey(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// WithRequire makes a call without a key fail with InvalidArgument (reason
// ReasonKeyMissing) instead of passing to the handler untouched. Default:
// off.
func WithRequire(on bool) Option {
	return func(c *config) error { c.require = on; return nil }
}

// WithScope names the principal of a call (the tenant, account or user who
// made it), which becomes part of every key, so that two principals
// sending the same key never meet and neither reads the other's stored
// answer. The full method name is always part of the scope too: the same
// key on two methods names two operations. A scope is required:
// UnaryServerInterceptor refuses a configuration with neither WithScope
// nor WithSingleTenant. nil is an error.
//
// The function gets the call's context (with its incoming metadata, its
// peer and the values of earlier interceptors: ScopeFromContext reads the
// principal an authentication interceptor put there, ScopeFromPeer a
// verified client certificate's identity) and is called once per keyed
// call, from any goroutine. "" names no principal: the call fails with
// Unauthenticated (reason ReasonScopeMissing) and nothing is claimed.
// Name the principal by what stays the same across a retry, never by a
// credential that rotates (a bearer token in the authorization metadata):
// a retry after a token refresh is the same operation. WithScope and
// WithSingleTenant set one setting: the last given wins.
func WithScope(scope func(ctx context.Context, fullMethod string) string) Option {
	return func(c *config) error {
		if scope == nil {
			return errors.New("WithScope: give a function that names the call's principal, or WithSingleTenant() for a service with one (got nil)")
		}
		c.scope, c.scoped = scope, true
		return nil
	}
}

// WithSingleTenant says, explicitly, that the service has one principal:
// every caller shares one scope per method, and a stored answer reaches
// any caller that sends its key and request. Use it only where that is
// true; a service with several tenants or users gives WithScope instead.
// It replaces a WithScope given before it.
func WithSingleTenant() Option {
	return func(c *config) error { c.scope, c.scoped = nil, true; return nil }
}

// WithFingerprint configures the fingerprint of the request message with
// the options of package fingerprint: WithAllow and WithDeny take paths of
// proto field names (the names in the .proto file, as protojson writes
// them with UseProtoNames), WithDefaultDeny(false) drops the default
// deny-list of noisy names (timestamp, nonce, trace_id, request_id …),
// WithMaxBytes bounds the message's JSON form. Default: the default
// deny-list, no allow-list, no size limit of the interceptor's own (the
// server's receive limit bounds the message; fingerprint.HardMaxBytes
// still applies). Names are always matched exactly
// (fingerprint.WithCaseSensitiveNames(true) is applied last): proto field
// names are exact, and the keys of a map field are data that may differ
// only in case. Options about HTTP requests (method, route, query,
// headers) have no effect. Calls add up. A malformed path is an error.
func WithFingerprint(opts ...fingerprint.Option) Option {
	return func(c *config) error { c.fpOpts = append(c.fpOpts, opts...); return nil }
}

// WithKeep sets which handler errors are kept as the key's final answer:
// a status for which keep reports true is stored and replayed to every
// retry (code, message and details), and the handler does not run again
// for the key. Default: none is kept — any handler error releases the key,
// so that a retry runs the handler again (as the HTTP middleware does for
// 5xx). A typical policy keeps the answers no retry can change:
//
//	idemgrpc.WithKeep(func(s *status.Status) bool {
//		switch s.Code() {
//		case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
//			codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange:
//			return true
//		}
//		return false
//	})
//
// keep is called from any goroutine with the handler's status (an error
// that is not a status is codes.Unknown with its text). nil is an error.
func WithKeep(keep func(*status.Status) bool) Option {
	return func(c *config) error {
		if keep == nil {
			return errors.New("WithKeep: give a policy, or leave the option out to keep no error (got nil)")
		}
		c.keep = keep
		return nil
	}
}

// WithRetryDelays sets the delays the interceptor advises in the RetryInfo
// detail of its retryable answers: inFlight for Aborted (the key is in
// flight, or another owner took it over), unavailable for Unavailable (the
// stores could not decide, or the result is not stored yet). Default:
// DefaultInFlightDelay (1 s) and DefaultUnavailableDelay (5 s). A delay
// under one millisecond is an error.
func WithRetryDelays(inFlight, unavailable time.Duration) Option {
	return func(c *config) error {
		var errs []error
		if inFlight < time.Millisecond {
			errs = append(errs, fmt.Errorf("WithRetryDelays: give an in-flight delay of 1ms or more (got %v)", inFlight))
		}
		if unavailable < time.Millisecond {
			errs = append(errs, fmt.Errorf("WithRetryDelays: give an unavailable delay of 1ms or more (got %v)", unavailable))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		c.inFlight, c.unavailable = inFlight, unavailable
		return nil
	}
}

// WithReplayHeader turns the ReplayedHeader response header on replays on
// or off. Default: on.
func WithReplayHeader(on bool) Option {
	return func(c *config) error { c.replayHeader = on; return nil }
}

// WithReplayMetadata names the header and trailer metadata keys that the
// handler sets (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer) and that
// are stored with its answer and replayed with it. The handler's own call
// gets them from the stored answer too, as every replay: what the handler
// sets of them after its answer was stored reaches no call, and a header it
// sends goes out with the answer. Default: none — every call, the
// handler's own included, carries the response or the kept status and no
// metadata of the handler's (a replay also carries ReplayedHeader). Names are case-insensitive; binary keys
// ("-bin") are allowed. Calls add up. An invalid metadata key, a name
// reserved by gRPC ("grpc-…") and ReplayedHeader are errors.
func WithReplayMetadata(names ...string) Option {
	return func(c *config) error {
		var errs []error
		for _, name := range names {
			n := strings.ToLower(name)
			switch {
			case !metadataKey(n):
				errs = append(errs, fmt.Errorf("WithReplayMetadata: give metadata keys (got %q)", name))
			case strings.HasPrefix(n, "grpc-"):
				errs = append(errs, fmt.Errorf("WithReplayMetadata: give names that gRPC does not reserve, not starting grpc- (got %q)", name))
			case n == ReplayedHeader:
				errs = append(errs, fmt.Errorf("WithReplayMetadata: give names other than ReplayedHeader, which the interceptor sets itself (got %q)", name))
			default:
				if c.replayMD == nil {
					c.replayMD = map[string]bool{}
				}
				c.replayMD[n] = true
			}
		}
		return errors.Join(errs...)
	}
}

// WithPanicHandler sets a function told of each handler panic, with the
// panic's value and stack, once per panic, on the goroutine that panicked
// and with the handler's context, before the Store releases the key: the
// place to log it, since the panic never reaches a recovery interceptor
// outside this one. A panic of onPanic itself is recovered by the Store as
// the handler's would be. Default: none. nil means none.
func WithPanicHandler(onPanic func(ctx context.Context, fullMethod string, p *tiered.PanicError)) Option {
	return func(c *config) error { c.onPanic = onPanic; return nil }
}
