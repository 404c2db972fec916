package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// MaxKeyLen is the longest key an idem server accepts, in bytes.
const MaxKeyLen = 255

// ErrBadKey reports a caller's key that the server would refuse: empty,
// longer than MaxKeyLen, with a byte outside printable ASCII, a bare key
// with a comma, or several key headers. Nothing was sent.
var ErrBadKey = errors.New("client: malformed idempotency key")

type keyCtx struct{}

// ContextWithKey returns a context under which a request is sent with key as its
// idempotency key, whatever its method: one key for one business
// operation (an order ID makes the best key). The Transport checks the key
// before sending (ErrBadKey). An Idempotency-Key header already on the
// request takes precedence.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// KeyFromContext returns the key ContextWithKey put in ctx, for other
// front doors (idemgrpc's client interceptor reads it too).
func KeyFromContext(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx{}).(string)
	return k, ok
}

// NewKey returns a fresh random key of 26 characters (130 random bits,
// base32), as the Transport mints for a request that has none. Make one per
// operation, before its first attempt, and keep it with the operation
// (a job's row, a message) when it must survive a restart of the client.
func NewKey() string { return rand.Text() }

// checkKey reports why the server would refuse k as a key. A quoted key
// ("abc", RFC 8941, where \" and \\ stand for " and \) is checked as the
// server reads it: its length counts the key inside the quotes.
func checkKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrBadKey)
	}
	quoted := k[0] == '"'
	n := 0 // bytes of the key as the server reads it
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c < 0x20 || c > 0x7e:
			return fmt.Errorf("%w: byte %#02x at %d is not printable ASCII", ErrBadKey, c, i)
		case !quoted && c == ',':
			return fmt.Errorf("%w: comma at %d in a bare key (send it quoted)", ErrBadKey, i)
		case quoted && i == 0:
			continue
		case quoted && c == '\\':
			if i+1 == len(k) || (k[i+1] != '"' && k[i+1] != '\\') {
				return fmt.Errorf("%w: bad escape at %d", ErrBadKey, i)
			}
			i++
		case quoted && c == '"':
			if i != len(k)-1 {
				return fmt.Errorf("%w: data after the closing quote at %d", ErrBadKey, i)
			}
			quoted = false // closed
			continue
		}
		n++
	}
	switch {
	case k[0] == '"' && (len(k) < 2 || k[len(k)-1] != '"' || quoted):
		return fmt.Errorf("%w: unterminated string", ErrBadKey)
	case n == 0:
		return fmt.Errorf("%w: empty", ErrBadKey)
	case n > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadKey, n, MaxKeyLen)
	}
	return nil
}
