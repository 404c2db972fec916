package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Complete implements idem.Layer with a token compare-and-set
// (complete.lua): the record becomes completed with result, kept for ttl
// (rounded up to whole milliseconds), its lease key is deleted and the key's
// waiters are woken. The owner token stays in the record, never shown to
// readers, so that Complete re-sent with the same token returns nil and
// changes nothing. Another token, a missing record or a record taken over
// gives idem.ErrLeaseLost; a result over the limit gives idem.ErrTooLarge.
func (l *Layer) Complete(ctx context.Context, key idem.Key, token string, result []byte, ttl time.Duration) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	if err := l.checkResult(result, ttl); err != nil {
		return err
	}
	return l.cas(ctx, "complete", key, func(c context.Context, n names) (int64, error) {
		return completeScript.Run(c, l.client, n.keys(), token, result, millis(ttl)).Int64()
	})
}

// Release implements idem.Layer with a token compare-and-set (release.lua):
// the in-progress record owned by token and its lease are deleted and the
// key's waiters are woken (their Wait returns idem.ErrNotFound). A missing
// record is not an error; another token or a completed record gives
// idem.ErrLeaseLost.
func (l *Layer) Release(ctx context.Context, key idem.Key, token string) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	return l.cas(ctx, "release", key, func(c context.Context, n names) (int64, error) {
		return releaseScript.Run(c, l.client, n.keys(), token).Int64()
	})
}

// Renew implements idem.Layer with a token compare-and-set (renew.lua): the
// lease key is set again to expire lease from now (rounded up to whole
// milliseconds), and the record's expiry is pushed out if it would end
// first. A renewal succeeds while the token still owns the in-progress
// record, even if its lease lapsed and no one took it over yet. Another
// token, a missing or completed record gives idem.ErrLeaseLost.
func (l *Layer) Renew(ctx context.Context, key idem.Key, token string, lease time.Duration) error {
	if key.IsZero() {
		return idem.ErrInvalidKey
	}
	if lease <= 0 {
		return fmt.Errorf("redislayer: lease must be positive (%v)", lease)
	}
	return l.cas(ctx, "renew", key, func(c context.Context, n names) (int64, error) {
		return renewScript.Run(c, l.client, n.keys(), token, millis(lease)).Int64()
	})
}

// cas runs one compare-and-set script, whose reply is 1 (done) or 0 (the
// token does not own the record).
func (l *Layer) cas(ctx context.Context, op string, key idem.Key, run func(context.Context, names) (int64, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, cancel := l.bound(ctx)
	ok, err := run(c, l.names(key))
	cancel()
	switch {
	case err != nil:
		return l.fail(ctx, op, err)
	case ok == 0:
		return idem.ErrLeaseLost
	}
	return nil
}

func (l *Layer) checkResult(result []byte, ttl time.Duration) error {
	if l.maxResult > 0 && len(result) > l.maxResult {
		return fmt.Errorf("%w: %d bytes, limit %d", idem.ErrTooLarge, len(result), l.maxResult)
	}
	if ttl <= 0 {
		return fmt.Errorf("redislayer: ttl must be positive (%v)", ttl)
	}
	return nil
}

// Get implements idem.Layer (get.lua): the live record without its token,
// or idem.ErrNotFound.
func (l *Layer) Get(ctx context.Context, key idem.Key) (idem.Record, error) {
	rec, _, err := l.read(ctx, key)
	return rec, err
}

// read returns the record for key and, for an in-progress record, how long
// its lease has left (0 when it lapsed).
func (l *Layer) read(ctx context.Context, key idem.Key) (idem.Record, time.Duration, error) {
	if key.IsZero() {
		return idem.Record{}, 0, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, 0, err
	}
	c, cancel := l.bound(ctx)
	v, err := getScript.Run(c, l.client, l.names(key).keys()).Slice()
	cancel()
	if isNil(err) {
		return idem.Record{}, 0, idem.ErrNotFound
	}
	if err != nil {
		return idem.Record{}, 0, l.fail(ctx, "get", err)
	}
	rec, left, ok := parseGet(v, key)
	if !ok {
		return idem.Record{}, 0, errReply("get", v)
	}
	return rec, left, nil
}

// parseGet decodes a reply of get.lua.
func parseGet(v []any, key idem.Key) (rec idem.Record, left time.Duration, ok bool) {
	if len(v) != 5 {
		return rec, 0, false
	}
	code, ok1 := replyInt(v[0])
	fp, ok2 := replyString(v[1])
	lu, ok3 := replyInt(v[2])
	ex, ok4 := replyInt(v[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return rec, 0, false
	}
	rec = idem.Record{Key: key, Fingerprint: fp, ExpiresAt: fromMillis(ex)}
	switch code {
	case 1:
		pttl, ok := replyInt(v[4])
		rec.State, rec.LeaseUntil = idem.StateInProgress, fromMillis(lu)
		return rec, time.Duration(max(pttl, 0)) * time.Millisecond, ok
	case 2:
		res, ok := replyBytes(v[4])
		rec.State, rec.Result = idem.StateCompleted, res
		return rec, 0, ok
	}
	return rec, 0, false
}
