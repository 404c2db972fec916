package sqllayer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// maxRounds bounds how often one Reserve starts over because the row changed
// between its statements (released, expired, taken over by another caller).
const maxRounds = 16

// claim is one Reserve's arguments in the form the statements take.
type claim struct {
	key    idem.Key
	digest []byte
	scope  any
	client any
	fp     []byte
	lease  int64 // microseconds
	expiry int64 // microseconds: see claimLife
}

// args returns the arguments ?0…?6 of the claim statements for token, and
// ?7, the token a takeover replaces.
func (c *claim) args(token string, old []byte) []any {
	a := []any{c.digest, c.scope, c.client, c.fp, bin(token), c.lease, c.expiry}
	if old != nil {
		a = append(a, old)
	}
	return a
}

// argsBounded returns the arguments of a Postgres claim for token that
// bounds its wait for a lock on the key: ?0…?6 as args, ?7 the
// lock_timeout (see pgLockBound).
func (c *claim) argsBounded(token, lockTimeout string) []any {
	return []any{c.digest, c.scope, c.client, c.fp, bin(token), c.lease, c.expiry, lockTimeout}
}

// owner returns the record a successful claim hands its caller. The row
// was written with an expiry of c.expiry from the database's clock during
// the statement, so that is what it has left, less the clock's resolution.
func (c *claim) owner(token string, leaseUntil, expiresAt time.Time, resolution time.Duration) idem.Record {
	return idem.Record{
		Key:         c.key,
		Fingerprint: string(c.fp),
		State:       idem.StateInProgress,
		Token:       token,
		LeaseUntil:  leaseUntil,
		ExpiresAt:   expiresAt,
		ExpiresIn:   max(time.Duration(c.expiry)*time.Microsecond-resolution, 0),
	}
}

// Reserve implements idem.Layer. See the package documentation for the
// statements each dialect runs.
func (l *Layer) Reserve(ctx context.Context, key idem.Key, fingerprint string, lease, ttl time.Duration) (idem.Record, bool, error) {
	if err := l.check(ctx, key); err != nil {
		return idem.Record{}, false, err
	}
	if lease <= 0 || ttl <= 0 {
		return idem.Record{}, false, fmt.Errorf("sqllayer: lease and ttl must be positive (lease %v, ttl %v)", lease, ttl)
	}
	if len(fingerprint) > maxFingerprint {
		return idem.Record{}, false, fmt.Errorf("sqllayer: fingerprint of %d bytes, limit %d", len(fingerprint), maxFingerprint)
	}
	rec, claimed, err := l.claimKey(ctx, l.newClaim(key, fingerprint, lease, ttl))
	if err != nil {
		return idem.Record{}, false, l.wrap("reserve", err)
	}
	return rec, claimed, nil
}

// newClaim returns Reserve's arguments in the form the statements take,
// batched or not.
func (l *Layer) newClaim(key idem.Key, fingerprint string, lease, ttl time.Duration) *claim {
	d := key.Digest()
	return &claim{
		key:    key,
		digest: d[:],
		scope:  l.text(label(key.Scope())),
		client: l.text(label(key.ClientKey())),
		fp:     bin(fingerprint),
		lease:  micros(lease),
		expiry: claimLife(micros(lease), micros(ttl)),
	}
}

// graceOf is the grace, in microseconds, that a Reserve passing a lease of
// lease microseconds grants a lapsed lease: a quarter of it.
func graceOf(lease int64) int64 { return lease / 4 }

// claimLife returns how long, in microseconds, a claim with lease and ttl
// (microseconds) is kept: the ttl, or the lease and its grace if they end
// later, so that a lapsed lease finds its record there to grant the grace
// however the retention compares with the lease. A completion then keeps
// the record for its own ttl.
func claimLife(lease, ttl int64) int64 { return max(ttl, lease+graceOf(lease)) }

// errRounds reports a key whose row kept changing under one Reserve.
var errRounds = fmt.Errorf("%w: reserve: the record changed %d times between statements", ErrConflict, maxRounds)

// reserve runs the claim flow in the layer's order until it has an answer.
func (l *Layer) reserve(ctx context.Context, c *claim) (idem.Record, bool, error) {
	q := l.pool()
	readFirst := l.readFirst()
	for round := range maxRounds {
		var (
			r      = l.newRow()
			found  bool
			token  string // minted only when this round writes
			record idem.Record
			ok     bool
			err    error
		)
		if readFirst {
			// A duplicate costs one primary-key read, which never writes,
			// locks or waits for a writer.
			if found, err = l.readRow(ctx, q, c.digest, &r); err != nil {
				return idem.Record{}, false, err
			}
		}
		if !found {
			token = idem.NewToken()
			switch {
			case l.dialect == dialect.PG && l.order == OrderOneRoundTrip:
				// Claim, or read the claim that beat this one, in one statement.
				found, err = queryOne(ctx, q, l.st.claimOrRead, c.argsBounded(token, pgLockBound(ctx)), r.dest()...)
				if err == nil && found && r.claimed {
					record, ok = c.owner(token, r.leaseUntil.t, r.expiresAt.t, l.resolution), true
				}
				if err == nil && !found {
					// The INSERT waited for a concurrent claim that committed
					// after this statement's snapshot: read in a new one.
					found, err = l.readRow(ctx, q, c.digest, &r)
				}
			case l.dialect == dialect.MySQL:
				var stmt string
				if stmt, err = l.mysqlClaim(ctx); err == nil {
					record, ok, err = l.insertMySQLIn(ctx, q, stmt, c, token)
				}
			default:
				record, ok, err = l.insertReturning(ctx, q, c, token)
			}
			if err != nil && !l.sqlite && lockWait(err, l.dialect) {
				return idem.Record{}, false, fmt.Errorf("%w: sqllayer: the key's claim is held by a transaction still open (an atomic execution's): %w", idem.ErrInFlight, err)
			}
			if round == 0 && err == nil {
				l.seen.Learn(!ok)
			}
			if err != nil || ok {
				return record, ok, err
			}
			if !found {
				// A concurrent claim won: read it in a new statement, which
				// sees it even when the INSERT waited for its commit.
				if found, err = l.readRow(ctx, q, c.digest, &r); err != nil {
					return idem.Record{}, false, err
				}
			}
		} else if round == 0 {
			l.seen.Learn(true)
		}
		if !found {
			continue // released or swept between the statements
		}
		if !r.takeable(c.fp) {
			return r.record(c.key, l.resolution), false, nil
		}
		if r.state == stateInProgress && !r.expired() {
			// The lease lapsed: its owner gets a grace before anyone takes
			// over, so that a completion it is still retrying lands first.
			if record, ok, err = l.grace(ctx, q, c, &r); err != nil || ok {
				if ok {
					l.observe(ctx, idem.Event{Kind: idem.EventGrace, Key: c.key})
				}
				return record, false, err
			}
			continue // another caller changed the row first: start over
		}
		if token == "" {
			token = idem.NewToken()
		}
		start := time.Now()
		if record, ok, err = l.takeover(ctx, q, c, token, r.token); err != nil || ok {
			if ok {
				// An expired completed record is gone, not taken over.
				record.TookOver = inProgress(r.state)
				l.observe(ctx, idem.Event{Kind: idem.EventTakeover, Key: c.key, Duration: time.Since(start)})
			}
			return record, ok, err
		}
		// Another caller changed the row first: start over.
	}
	return idem.Record{}, false, errRounds
}

// insertMySQLIn claims a free key with query, a plain INSERT (the insert
// as an atomic claim sends it). ok is false when the key is taken (error
// 1062).
func (l *Layer) insertMySQLIn(ctx context.Context, q querier, query string, c *claim, token string) (idem.Record, bool, error) {
	res, err := q.exec(ctx, query, c.args(token, nil)...)
	if err != nil {
		if classify(err, l.dialect) == kindUnique {
			return idem.Record{}, false, nil
		}
		return idem.Record{}, false, err
	}
	return l.mysqlOwner(res.LastInsertId, c, token)
}

// mysqlOwner builds the claimed record from the database's "now", which the
// statement returned as its insert ID (see stmt_mysql.go).
func (l *Layer) mysqlOwner(lastInsertID func() (int64, error), c *claim, token string) (idem.Record, bool, error) {
	now, err := lastInsertID()
	if err != nil {
		return idem.Record{}, false, err
	}
	if now <= 0 {
		return idem.Record{}, false, errors.New("sqllayer: the server did not return its clock with the claim")
	}
	t := time.UnixMicro(now).UTC()
	return c.owner(token, t.Add(time.Duration(c.lease)*time.Microsecond), t.Add(time.Duration(c.expiry)*time.Microsecond), l.resolution), true, nil
}

// insertReturning claims a free key with INSERT … ON CONFLICT DO NOTHING
// RETURNING (Postgres, SQLite). ok is false when the key is taken.
func (l *Layer) insertReturning(ctx context.Context, q querier, c *claim, token string) (idem.Record, bool, error) {
	var args []any
	if l.dialect == dialect.PG {
		args = c.argsBounded(token, pgLockBound(ctx))
	} else {
		args = c.args(token, nil)
	}
	lease, expires := l.newRow().leaseUntil, l.newRow().expiresAt
	found, err := queryOne(ctx, q, l.st.insert, args, &lease, &expires)
	if err != nil || !found {
		return idem.Record{}, false, err
	}
	return c.owner(token, lease.t, expires.t, l.resolution), true, nil
}

// takeover replaces the row held by old with a new claim, if the database
// still finds it expired or lapsed. ok is false when another caller changed
// it first.
func (l *Layer) takeover(ctx context.Context, q querier, c *claim, token string, old []byte) (idem.Record, bool, error) {
	return l.takeoverWith(ctx, q, l.st.takeover, c, token, old)
}

// takeoverWith is takeover with the statement query, the takeover as an
// atomic claim sends it.
func (l *Layer) takeoverWith(ctx context.Context, q querier, query string, c *claim, token string, old []byte) (idem.Record, bool, error) {
	if old == nil {
		old = []byte{}
	}
	if l.dialect == dialect.MySQL {
		res, err := q.exec(ctx, query, c.args(token, old)...)
		if err != nil {
			return idem.Record{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return idem.Record{}, false, err
		}
		return l.mysqlOwner(res.LastInsertId, c, token)
	}
	lease, expires := l.newRow().leaseUntil, l.newRow().expiresAt
	found, err := queryOne(ctx, q, query, c.args(token, old), &lease, &expires)
	if err != nil || !found {
		return idem.Record{}, false, err
	}
	return c.owner(token, lease.t, expires.t, l.resolution), true, nil
}

// grace extends the lapsed lease of the in-progress row r by a quarter of
// the claim's lease, keeping its token, if the database still finds it
// lapsed and not yet in a grace. It returns the record as readers now see
// it (in progress); ok is false when another caller changed the row first.
func (l *Layer) grace(ctx context.Context, q querier, c *claim, r *row) (idem.Record, bool, error) {
	graceLen := graceOf(c.lease)
	args := []any{c.digest, r.token, graceLen, c.fp}
	rec := r.record(c.key, l.resolution)
	rec.State = idem.StateInProgress
	if l.dialect == dialect.MySQL {
		res, err := q.exec(ctx, l.st.grace, args...)
		if err != nil {
			return idem.Record{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return idem.Record{}, false, err
		}
		now, err := res.LastInsertId()
		if err != nil {
			return idem.Record{}, false, err
		}
		if now <= 0 {
			return idem.Record{}, false, errors.New("sqllayer: the server did not return its clock with the grace")
		}
		// The expiry is the one read before, or the grace's end if later:
		// the statement kept the greater of the row's and the grace's, and
		// a row's expiry only grows while its token holds it.
		t := time.UnixMicro(now).UTC()
		rec.LeaseUntil = t.Add(time.Duration(graceLen) * time.Microsecond)
		rec.ExpiresAt = r.expiresAt.t
		if rec.ExpiresAt.Before(rec.LeaseUntil) {
			rec.ExpiresAt = rec.LeaseUntil
		}
		rec.ExpiresIn = max(rec.ExpiresAt.Sub(t)-l.resolution, 0)
		return rec, true, nil
	}
	lease, expires := l.newRow().leaseUntil, l.newRow().expiresAt
	var micros sql.NullInt64
	found, err := queryOne(ctx, q, l.st.grace, args, &lease, &expires, &micros)
	if err != nil || !found {
		return idem.Record{}, false, err
	}
	rec.LeaseUntil, rec.ExpiresAt, rec.ExpiresIn = lease.t, expires.t, left(micros, l.resolution)
	return rec, true, nil
}
