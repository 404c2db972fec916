package redislayer

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// ErrClosed reports a Wait on a closed Layer (or one ended by Close). It is
// always wrapped with idem.ErrUnavailable.
var ErrClosed = errors.New("redislayer: layer closed")

// fail translates an error of a call made under ctx. The caller's own
// cancellation or deadline stays theirs (context.Canceled or
// context.DeadlineExceeded); the layer's timeout and every driver error
// become idem.ErrUnavailable.
func (l *Layer) fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("redislayer: %s: %w", op, cerr)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || (errors.As(err, &ne) && ne.Timeout()) {
		// Not wrapped: the deadline was the layer's, not the caller's.
		return fmt.Errorf("%w: redislayer: %s: no answer within %v (%v)", idem.ErrUnavailable, op, l.timeout, err)
	}
	return fmt.Errorf("%w: redislayer: %s: %w", idem.ErrUnavailable, op, err)
}

// errReply reports a script reply of an unexpected shape: another program
// wrote under the layer's prefix, or the scripts and the code disagree.
func errReply(op string, v any) error {
	return fmt.Errorf("%w: redislayer: %s: unexpected reply %T %.80v", idem.ErrUnavailable, op, v, v)
}

// isNil reports redis.Nil, the reply of a script that found nothing.
func isNil(err error) bool { return errors.Is(err, redis.Nil) }
