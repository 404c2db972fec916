package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/clock"
)

// Complete implements idem.Layer with a token compare-and-set
// (complete.lua): the record becomes completed with result, kept for ttl
// (rounded up to whole milliseconds), and the key's waiters are woken. The
// owner completes within the grace a Reserve granted it, or after its
// lease lapsed as long as no one took the key over. The
// owner token stays in the record, never shown to readers, so that Complete
// re-sent with the same token returns nil and changes nothing. Another
// token, a missing record or a record taken over gives idem.ErrLeaseLost; a
// result over the limit gives idem.ErrTooLarge.
func (l *Layer) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	if err := l.checkResult(result, ttl); err != nil {
		return err
	}
	ms := millis(ttl)
	expiry := make([]byte, numWidth)
	putNum(expiry, clock.Now().UnixMilli()+ms)
	return l.cas(ctx, "complete", key, completeScript, token, result, expiry, ms)
}

// Release implements idem.Layer with a token compare-and-set (release.lua):
// the in-progress record owned by token is deleted and the key's waiters
// are woken (their Wait returns idem.ErrNotFound). A missing record is not
// an error; another token or a completed record gives idem.ErrLeaseLost.
func (l *Layer) Release(ctx context.Context, key idem.Key, token string) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	return l.cas(ctx, "release", key, releaseScript, token)
}

// Renew implements idem.Layer with a token compare-and-set (renew.lua): the
// lease mark is moved so that the lease lapses lease from now (rounded up to
// whole milliseconds), and the record's TTL is raised to the lease and its
// grace (lease/4) if it would end first, so that work running past the
// retention keeps its grace. A renewal succeeds while the token still
// owns the in-progress record, even if its lease lapsed and no one took it
// over yet (within the grace a Reserve granted, or after it); it ends the
// grace, so the next lapse gets one again. Another token, a missing or completed record gives
// idem.ErrLeaseLost.
func (l *Layer) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	if lease <= 0 || millis(lease) > maxMillis {
		return fmt.Errorf("redislayer: lease must be positive and below 31,000 years (%v)", lease)
	}
	ms, life := millis(lease), millis(lease)+graceMillis(lease)
	now := clock.Now().UnixMilli()
	until, expiry := make([]byte, numWidth), make([]byte, numWidth)
	putNum(until, now+ms)
	putNum(expiry, now+life)
	return l.cas(ctx, "renew", key, renewScript, token, ms, until, expiry, life)
}

// cas runs one compare-and-set script on key's record, whose reply is 1
// (done) or 0 (the token does not own the record).
func (l *Layer) cas(ctx context.Context, op string, key idem.Key, script *redis.Script, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ok, err := script.Run(ctx, l.client, []string{l.name(key)}, args...).Int64()
	switch {
	case err != nil:
		return l.fail(ctx, op, err)
	case ok == 0:
		return idem.ErrLeaseLost
	}
	return nil
}

func (l *Layer) checkResult(result []byte, ttl time.Duration) error {
	if len(result) > idem.MaxResult {
		return fmt.Errorf("%w: %d bytes, limit idem.MaxResult (%d)", idem.ErrTooLarge, len(result), idem.MaxResult)
	}
	if ttl <= 0 || millis(ttl) > maxMillis {
		return fmt.Errorf("redislayer: ttl must be positive and below 31,000 years (%v)", ttl)
	}
	return nil
}

// Get implements idem.Layer (get.lua): the live record without its token,
// with ExpiresIn from its PTTL, or idem.ErrNotFound.
func (l *Layer) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	rec, _, err := l.read(ctx, key, false)
	return rec, err
}

// read returns the record for key and, for an in-progress record, how long
// its lease has left (0 when it lapsed). A waiter's read flags an
// in-progress record as waited, so that its end is published.
func (l *Layer) read(ctx context.Context, key idem.Key, waiter bool) (idem.Record, time.Duration, error) {
	if key.IsZero() {
		return idem.Record{}, 0, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, 0, err
	}
	flag, callCtx, cancel := "", ctx, context.CancelFunc(func() {})
	if waiter {
		// A Wait's read: a round trip the layer makes itself, bounded by
		// its own timeout.
		flag = "w"
		callCtx, cancel = l.bound(ctx)
	}
	reply, err := getScript.Run(callCtx, l.client, []string{l.name(key)}, flag).Slice()
	cancel()
	if isNil(err) {
		return idem.Record{}, 0, idem.ErrNotFound
	}
	if err != nil {
		return idem.Record{}, 0, l.fail(ctx, "get", err)
	}
	v, pttl, err := recordReply("get", reply)
	if err != nil {
		return idem.Record{}, 0, err
	}
	s, err := decode(v)
	if err != nil {
		return idem.Record{}, 0, err
	}
	var left time.Duration
	if s.inProgress() {
		left = time.Duration(max(pttl-s.mark, 0)) * time.Millisecond
	}
	return s.record(key, "", leftMillis(pttl)), left, nil // "": copy the fingerprint out of v
}
