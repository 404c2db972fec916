package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/clock"
)

// Reserve implements idem.Layer. It is one round trip in the common cases,
// in the order WithReserveOrder sets (by default the one that suits the
// recent mix of new keys and duplicates): a GET answers a duplicate, and
// SET NX PX GET stores the claim (an in-progress record with a token minted
// here by idem.NewToken, never derived from the key) unless a record is
// there, and returns that record otherwise. Either command goes in a
// pipeline after a PTTL of the key, from which the record's ExpiresIn is
// learnt (see value.go). A completed record is a replay; an in-progress
// record with another fingerprint is returned as it is (it is never taken
// over). Only an in-progress record with the same fingerprint costs a
// second round trip, reserve.lua, which decides atomically whether its
// lease has lapsed: the first Reserve to find it lapsed grants the owner a
// grace of lease/4 (the lease this call passes) and answers in progress, and
// one that finds the grace lapsed too takes it over with the new token. A
// claim re-sent by go-redis after a lost reply finds its own token and
// stays this caller's claim.
//
// The record lives for ttl, or for the lease and its grace (lease/4) if
// they end later, so that the grace is there to grant however the
// retention compares with the lease; its lease lapses when Redis has
// counted lease off that TTL (durations are rounded up to whole
// milliseconds). lease and ttl must be positive, the fingerprint at most
// idem.MaxFingerprint bytes. A duplicate costs one read and no write.
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
	if len(fingerprint) > idem.MaxFingerprint {
		return idem.Record{}, false, fmt.Errorf("redislayer: fingerprint of %d bytes, limit idem.MaxFingerprint (%d)", len(fingerprint), idem.MaxFingerprint)
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	name := l.name(key)
	arg := any(name) // boxed once for both commands of a pipeline
	viaScript := l.scriptOnly.Load()
	if !viaScript && l.readFirst() {
		cmd := redis.NewStringCmd(ctx, "get", arg)
		pttl, err := l.afterPTTL(ctx, arg, cmd)
		switch {
		case isNil(err): // a new key: claim it below
		case err != nil:
			return idem.Record{}, false, l.fail(ctx, "reserve", err)
		default:
			s, err := decode(cmd.Val())
			if err != nil {
				return idem.Record{}, false, err
			}
			if !s.inProgress() || s.fp != fingerprint {
				l.seen.Learn(true)
				return s.record(key, fingerprint, s.expiresIn(pttl)), false, nil
			}
			// In progress with this fingerprint: only reserve.lua can
			// tell whether its lease has lapsed.
			viaScript = true
		}
	}
	token := idem.NewToken()
	leaseMs, graceMs := millis(lease), graceMillis(lease)
	ttlMs := max(millis(ttl), leaseMs+graceMs)
	now := clock.Now().UnixMilli()
	claim := encode(stateInProgress, token, ttlMs-leaseMs, now+leaseMs, now+ttlMs, fingerprint, nil)
	claimed := func() (idem.Record, bool, error) {
		l.seen.Learn(false)
		// The key was set for ttlMs during this call.
		return idem.Record{Key: key, Fingerprint: fingerprint, State: idem.StateInProgress, Token: token,
			LeaseUntil: fromMillis(now + leaseMs), ExpiresAt: fromMillis(now + ttlMs), ExpiresIn: leftMillis(ttlMs)}, true, nil
	}

	var (
		v    string
		pttl int64
		err  error
	)
	if !viaScript {
		cmd := redis.NewStringCmd(ctx, "set", arg, claim, "px", ttlMs, "nx", "get")
		pttl, err = l.afterPTTL(ctx, arg, cmd)
		v = cmd.Val()
		if err != nil && !isNil(err) && redis.HasErrorPrefix(err, "syntax error") { // go-redis trims "ERR "
			l.scriptOnly.Store(true) // Redis < 7.0: no NX with GET
			viaScript = true
		}
	}
	scripted := viaScript || (err == nil && sameOwnerCandidate(v, fingerprint, token))
	if scripted {
		graceEnd := make([]byte, numWidth)
		putNum(graceEnd, now+graceMs)
		v, pttl, err = l.reserveScript(ctx, name, claim, ttlMs, graceMs, graceEnd)
	}
	if isNil(err) {
		return claimed()
	}
	if err != nil {
		return idem.Record{}, false, l.fail(ctx, "reserve", err)
	}
	s, err := decode(v)
	if err != nil {
		return idem.Record{}, false, err
	}
	if s.inProgress() && s.token == token {
		// SET NX GET re-sent by go-redis after it had stored our claim.
		return claimed()
	}
	l.seen.Learn(true)
	left := s.expiresIn(pttl)
	if scripted {
		left = leftMillis(pttl) // the script read the PTTL with the record
	}
	return s.record(key, fingerprint, left), false, nil
}

// graceMillis is the grace, in whole milliseconds (at least 1), that a
// Reserve passing lease grants a lapsed lease: a quarter of it.
func graceMillis(lease time.Duration) int64 { return millis(lease / 4) }

// afterPTTL sends PTTL name and then cmd in one pipeline, one round trip,
// and returns the PTTL (ms; -2 when the key was missing). The error is
// cmd's (redis.Nil when GET or SET NX GET found no key).
func (l *Layer) afterPTTL(ctx context.Context, name any, cmd redis.Cmder) (int64, error) {
	pttl := redis.NewIntCmd(ctx, "pttl", name)
	p := l.pipes.Get().(redis.Pipeliner)
	_ = p.BatchProcess(ctx, pttl, cmd)
	_, execErr := p.Exec(ctx) // each command keeps its own error…
	l.pipes.Put(p)
	if err := cmd.Err(); err != nil {
		return 0, err
	}
	if err := pttl.Err(); err != nil {
		return 0, err
	}
	if execErr != nil {
		// … except a reply of the server to setting the connection up
		// (WRONGPASS to AUTH, an error to SELECT), which go-redis returns
		// from Exec alone, leaving both commands empty and without error.
		return 0, execErr
	}
	return pttl.Val(), nil
}

// reserveScript runs reserve.lua: nil (redis.Nil) when the claim was
// stored, else the record and its PTTL.
func (l *Layer) reserveScript(ctx context.Context, name string, claim []byte, ttlMs, graceMs int64, graceEnd []byte) (string, int64, error) {
	reply, err := reserveScript.Run(ctx, l.client, []string{name}, claim, ttlMs, graceMs, graceEnd).Slice()
	if err != nil {
		return "", 0, err
	}
	return recordReply("reserve", reply)
}

// sameOwnerCandidate reports whether the record v that SET NX GET found may
// be taken over by a claim for fingerprint, or its owner granted a grace:
// in progress, same fingerprint, another token. Only reserve.lua can tell
// whether its lease has lapsed.
func sameOwnerCandidate(v, fingerprint, token string) bool {
	s, err := decode(v)
	return err == nil && s.inProgress() && s.fp == fingerprint && s.token != token
}

// recordReply reads a script's {record, PTTL} reply.
func recordReply(op string, reply []any) (string, int64, error) {
	var v string
	var pttl int64
	ok := len(reply) == 2
	if ok {
		v, ok = reply[0].(string)
	}
	if ok {
		pttl, ok = reply[1].(int64)
	}
	if !ok {
		return "", 0, errReply(op, reply)
	}
	return v, pttl, nil
}
