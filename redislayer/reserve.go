package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Reserve implements idem.Layer in one round trip (reserve.lua): it returns
// the completed record (replay), the in-progress record of another owner
// (wait; no token), or a new claim. The token is minted here with
// idem.NewToken and sent to the script, never derived from the key; a claim
// re-sent by go-redis after a lost reply is recognised by its token and
// stays this caller's claim.
//
// The record expires after max(ttl, lease) and the lease key after lease,
// both by Redis TTLs (rounded up to whole milliseconds). A same-fingerprint
// claim whose lease key has expired is taken over with a new token; a record
// with another fingerprint is never taken over. lease and ttl must be
// positive. A duplicate costs one read and no write.
func (l *Layer) Reserve(ctx context.Context, key idem.Key, fingerprint string, lease, ttl time.Duration) (idem.Record, bool, error) {
	if key.IsZero() {
		return idem.Record{}, false, idem.ErrInvalidKey
	}
	if lease <= 0 || ttl <= 0 {
		return idem.Record{}, false, fmt.Errorf("redislayer: lease and ttl must be positive (lease %v, ttl %v)", lease, ttl)
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	n := l.names(key)
	token := idem.NewToken()
	c, cancel := l.bound(ctx)
	v, err := reserveScript.Run(c, l.client, n.keys(), fingerprint, token, millis(lease), millis(ttl)).Slice()
	cancel()
	if err != nil {
		return idem.Record{}, false, l.fail(ctx, "reserve", err)
	}
	rec, claimed, ok := parseReserve(v, key, fingerprint)
	if !ok {
		return idem.Record{}, false, errReply("reserve", v)
	}
	if claimed {
		rec.Token = token
	}
	return rec, claimed, nil
}

// parseReserve decodes a reply of reserve.lua.
func parseReserve(v []any, key idem.Key, fingerprint string) (rec idem.Record, claimed, ok bool) {
	if len(v) < 3 {
		return rec, false, false
	}
	code, ok := replyInt(v[0])
	if !ok {
		return rec, false, false
	}
	rec.Key = key
	rec.Fingerprint = fingerprint
	if code == 0 {
		lu, ok1 := replyInt(v[1])
		ex, ok2 := replyInt(v[2])
		rec.State = idem.StateInProgress
		rec.LeaseUntil, rec.ExpiresAt = fromMillis(lu), fromMillis(ex)
		return rec, true, ok1 && ok2
	}
	if len(v) < 4 {
		return rec, false, false
	}
	if fp, ok := replyString(v[1]); ok {
		rec.Fingerprint = fp
	}
	switch code {
	case 1:
		lu, ok1 := replyInt(v[2])
		ex, ok2 := replyInt(v[3])
		rec.State = idem.StateInProgress
		rec.LeaseUntil, rec.ExpiresAt = fromMillis(lu), fromMillis(ex)
		return rec, false, ok1 && ok2
	case 2:
		ex, ok1 := replyInt(v[2])
		res, ok2 := replyBytes(v[3])
		rec.State = idem.StateCompleted
		rec.ExpiresAt, rec.Result = fromMillis(ex), res
		return rec, false, ok1 && ok2
	}
	return rec, false, false
}
