package redislayer

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// commands are the commands the layer sends, itself and inside its scripts:
// what an ACL must allow the client's user, on keys and channels under the
// prefix.
const commands = "PING, GET, SET, PTTL, EVALSHA, EVAL, SUBSCRIBE, UNSUBSCRIBE and, inside the scripts, GETRANGE, SETRANGE, DEL and PUBLISH"

// fail translates an error of a call made under ctx. The caller's own
// cancellation or deadline stays theirs (context.Canceled or
// context.DeadlineExceeded); a mistake in the setup (see setupMistake)
// becomes idem.ErrConfig, with advice; the layer's own timeout (a Wait's
// round trips), the client's (ReadTimeout, WriteTimeout) and every other
// driver error become idem.ErrUnavailable.
func (l *Layer) fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			// The deadline ended while the client was failing for a
			// reason of its own (a refused connection, say): keep it, it
			// is what an operator needs to read.
			return fmt.Errorf("redislayer: %s: %w (after: %v)", op, cerr, err)
		}
		return fmt.Errorf("redislayer: %s: %w", op, cerr)
	}
	if advice := l.setupMistake(err); advice != "" {
		return fmt.Errorf("%w: redislayer: %s: %s: %w", idem.ErrConfig, op, advice, err)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || (errors.As(err, &ne) && ne.Timeout()) {
		// Not wrapped: the deadline was the layer's or the client's, not the
		// caller's.
		return fmt.Errorf("%w: redislayer: %s: no answer in time (%v)", idem.ErrUnavailable, op, err)
	}
	return fmt.Errorf("%w: redislayer: %s: %w", idem.ErrUnavailable, op, err)
}

// setupMistake returns what to do about err when it is a reply of the
// server that no retry changes, a mistake in setting the client up, and ""
// otherwise. Redis replies carry their kind as the first word (NOAUTH,
// WRONGPASS, NOPERM; go-redis types them), except for a few plain ERR
// replies, which only their text tells apart.
func (l *Layer) setupMistake(err error) string {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return "" // not the server's answer: the network, a timeout, a closed client
	}
	switch {
	case redis.IsAuthError(err): // NOAUTH, WRONGPASS
		return "Redis refused the credentials: set the Username and Password of the client's options to a user of the server"
	case redis.IsPermissionError(err): // NOPERM
		return fmt.Sprintf("the ACL forbids the client's user a command, key or channel the layer uses: allow %s on keys and channels %q*", commands, l.prefix)
	case redis.HasErrorPrefix(err, "DB index is out of range"):
		return "the DB number of the client's options does not exist on this server"
	case redis.HasErrorPrefix(err, "SELECT is not allowed in cluster mode"):
		return "a Cluster has only DB 0: remove the DB number from the client's options"
	case redis.HasErrorPrefix(err, "unknown command"):
		return fmt.Sprintf("the server does not offer a command the layer uses (renamed or disabled?): the layer needs %s", commands)
	}
	return ""
}

// errReply reports a script reply of an unexpected shape: another program
// wrote under the layer's prefix, or the scripts and the code disagree.
func errReply(op string, v any) error {
	return fmt.Errorf("%w: redislayer: %s: unexpected reply %T %.80v", idem.ErrUnavailable, op, v, v)
}

// isNil reports redis.Nil, the reply of a script that found nothing.
func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// isNoScript reports a NOSCRIPT reply: the server does not know the
// script's digest (it restarted, or its script cache was flushed).
func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }
