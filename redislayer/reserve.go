package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Reserve implements idem.Layer. It is one round trip in the common cases,
// in the order WithReserveOrder sets (by default the one that suits the
// recent mix of new keys and duplicates): a GET answers a duplicate, and
// SET NX PX GET stores the claim (an in-progress record with a token minted
// here by idem.NewToken, never derived from the key) unless a record is
// there, and returns that record otherwise. A completed record is a replay;
// an in-progress record with another fingerprint is returned as it is (it is
// never taken over). Only an in-progress record with the same fingerprint
// costs a second round trip, reserve.lua, which takes it over with the new
// token if its lease has lapsed, atomically. A claim re-sent by go-redis
// after a lost reply finds its own token and stays this caller's claim.
//
// The record lives for max(ttl, lease) and its lease lapses when Redis has
// counted lease off that TTL (durations are rounded up to whole
// milliseconds). lease and ttl must be positive, the fingerprint at most
// MaxFingerprint bytes. A duplicate costs one read and no write.
//
// Redis before 7.0 refuses NX with GET; the layer then uses reserve.lua for
// every Reserve, still one round trip.
func (l *Layer) Reserve(ctx context.Context, key idem.Key, fingerprint string, lease, ttl time.Duration) (idem.Record, bool, error) {
	if key.IsZero() {
		return idem.Record{}, false, idem.ErrInvalidKey
	}
	if lease <= 0 || ttl <= 0 || millis(lease) > maxMillis || millis(ttl) > maxMillis {
		return idem.Record{}, false, fmt.Errorf("redislayer: lease and ttl must be positive and below 31,000 years (lease %v, ttl %v)", lease, ttl)
	}
	if len(fingerprint) > MaxFingerprint {
		return idem.Record{}, false, fmt.Errorf("redislayer: fingerprint of %d bytes, limit %d", len(fingerprint), MaxFingerprint)
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	name := l.name(key)
	c, cancel := l.bound(ctx)
	defer cancel()
	viaScript := l.scriptOnly.Load()
	if !viaScript && l.readFirst() {
		cmd := redis.NewStringCmd(c, "get", name)
		_ = l.client.Process(c, cmd)
		v, err := cmd.Result()
		switch {
		case isNil(err): // a new key: claim it below
		case err != nil:
			return idem.Record{}, false, l.fail(ctx, "reserve", err)
		default:
			s, err := decode(v)
			if err != nil {
				return idem.Record{}, false, err
			}
			if s.state == stateCompleted || s.fp != fingerprint {
				l.seen.Learn(true)
				return s.record(key, fingerprint), false, nil
			}
			// In progress with this fingerprint: only reserve.lua can
			// tell whether its lease has lapsed.
			viaScript = true
		}
	}
	token := idem.NewToken()
	leaseMs, ttlMs := millis(lease), max(millis(ttl), millis(lease))
	now := time.Now().UnixMilli()
	claim := encode(stateInProgress, token, ttlMs-leaseMs, now+leaseMs, now+ttlMs, fingerprint, nil)

	var v string
	var err error
	if !viaScript {
		cmd := redis.NewStringCmd(c, "set", name, claim, "px", ttlMs, "nx", "get")
		_ = l.client.Process(c, cmd)
		v, err = cmd.Result()
		if err != nil && !isNil(err) && redis.HasErrorPrefix(err, "syntax error") { // go-redis trims "ERR "
			l.scriptOnly.Store(true) // Redis < 7.0: no NX with GET
			viaScript = true
		}
	}
	if viaScript || (err == nil && sameOwnerCandidate(v, fingerprint, token)) {
		v, err = reserveScript.Run(c, l.client, []string{name}, claim, ttlMs).Text()
	}
	if isNil(err) {
		l.seen.Learn(false)
		return idem.Record{Key: key, Fingerprint: fingerprint, State: idem.StateInProgress, Token: token,
			LeaseUntil: fromMillis(now + leaseMs), ExpiresAt: fromMillis(now + ttlMs)}, true, nil
	}
	if err != nil {
		return idem.Record{}, false, l.fail(ctx, "reserve", err)
	}
	s, err := decode(v)
	if err != nil {
		return idem.Record{}, false, err
	}
	if s.state == stateInProgress && s.token == token {
		// SET NX GET re-sent by go-redis after it had stored our claim.
		l.seen.Learn(false)
		rec := s.record(key, fingerprint)
		rec.Token = token
		return rec, true, nil
	}
	l.seen.Learn(true)
	return s.record(key, fingerprint), false, nil
}

// sameOwnerCandidate reports whether the record v that SET NX GET found may
// be taken over by a claim for fingerprint: in progress, same fingerprint,
// another token. Only reserve.lua can tell whether its lease has lapsed.
func sameOwnerCandidate(v, fingerprint, token string) bool {
	s, err := decode(v)
	return err == nil && s.state == stateInProgress && s.fp == fingerprint && s.token != token
}
