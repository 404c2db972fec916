package sqllayer

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// dbTime scans a time as each dialect returns it: timestamptz (time.Time,
// absolute), DATETIME(6) in UTC (time.Time in the driver's loc, or text
// without parseTime) and SQLite's integer microseconds. NULL is the zero time.
type dbTime struct {
	t time.Time
	// wall: the value is a wall-clock UTC DATETIME, whatever location the
	// driver attached to it.
	wall bool
}

const mysqlTime = "2006-01-02 15:04:05.999999999"

// Scan implements sql.Scanner.
func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		d.t = time.Time{}
	case time.Time:
		if d.wall {
			v = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		}
		d.t = v.UTC()
	case int64:
		d.t = time.UnixMicro(v).UTC()
	case float64:
		d.t = time.UnixMicro(int64(v)).UTC()
	case []byte:
		return d.parse(string(v))
	case string:
		return d.parse(v)
	default:
		return fmt.Errorf("sqllayer: cannot scan %T into a time", src)
	}
	return nil
}

func (d *dbTime) parse(s string) error {
	t, err := time.ParseInLocation(mysqlTime, s, time.UTC)
	if err != nil {
		return fmt.Errorf("sqllayer: cannot parse time %q: %w", s, err)
	}
	d.t = t
	return nil
}

// States stored in the state column: idem.StateInProgress (1),
// idem.StateCompleted (2), and stateGrace, an in-progress record whose
// lapsed lease a Reserve extended by a grace; readers see it in progress.
const (
	stateInProgress = int64(idem.StateInProgress)
	stateGrace      = 3
)

// inProgress reports whether a stored state is in progress, in a grace or
// not.
func inProgress(state int64) bool { return state == stateInProgress || state == stateGrace }

// row is a stored record as the claim and read statements return it, with
// the database's verdict on its clocks.
type row struct {
	claimed     bool // the statement inserted it (Postgres claim-or-read)
	fingerprint []byte
	state       int64
	token       []byte
	result      []byte
	leaseUntil  dbTime
	expiresAt   dbTime
	// left is how long the record has left, in microseconds from the
	// database's "now" to expires_at: at most 0 when it has expired (and is
	// absent). NULL for a row the statement just inserted.
	left   sql.NullInt64
	lapsed sql.NullBool // lease_until has passed
}

func (l *Layer) newRow() row {
	wall := !l.native
	return row{leaseUntil: dbTime{wall: wall}, expiresAt: dbTime{wall: wall}}
}

func (r *row) dest() []any {
	return []any{&r.claimed, &r.fingerprint, &r.state, &r.token, &r.result, &r.leaseUntil, &r.expiresAt, &r.left, &r.lapsed}
}

// destAt is where a Postgres read of a record goes: the record and the
// server's clock, from which at derives the verdicts on it.
func (r *row) destAt(now *dbTime) []any {
	return []any{&r.fingerprint, &r.state, &r.token, &r.result, &r.leaseUntil, &r.expiresAt, now}
}

// at sets the verdicts on the record by the database's clock now, as the
// statements that compute them do: both are microseconds, so left is
// exact.
func (r *row) at(now time.Time) {
	r.left = sql.NullInt64{Int64: int64(r.expiresAt.t.Sub(now) / time.Microsecond), Valid: true}
	r.lapsed = sql.NullBool{}
	if !r.leaseUntil.t.IsZero() {
		r.lapsed = sql.NullBool{Bool: !r.leaseUntil.t.After(now), Valid: true}
	}
}

// expired reports whether the record's expiry has passed by the database's
// clock: it is absent, whatever it held.
func (r *row) expired() bool { return r.left.Valid && r.left.Int64 <= 0 }

// takeable reports whether a claim for fingerprint fp may act on the stored
// record: it has expired (an expired record is absent, whatever it held), or
// it is in progress for the same fingerprint and its lease has lapsed (the
// claim then grants a grace, or takes over once the grace lapsed too).
func (r *row) takeable(fp []byte) bool {
	if r.expired() {
		return true
	}
	return inProgress(r.state) && r.lapsed.Bool && bytes.Equal(r.fingerprint, fp)
}

// record returns what a non-owner sees: no token. resolution is the
// database clock's, by which ExpiresIn is rounded down.
func (r *row) record(key idem.Key, resolution time.Duration) idem.Record {
	rec := idem.Record{
		Key:         key,
		Fingerprint: string(r.fingerprint),
		State:       idem.State(r.state),
		LeaseUntil:  r.leaseUntil.t,
		ExpiresAt:   r.expiresAt.t,
		ExpiresIn:   left(r.left, resolution),
	}
	if r.state == stateGrace {
		rec.State = idem.StateInProgress
	}
	if rec.State == idem.StateCompleted {
		rec.Result = r.result
		if rec.Result == nil {
			rec.Result = []byte{}
		}
		rec.LeaseUntil = time.Time{}
	}
	return rec
}

// left converts what a statement said a record has left (microseconds from
// the database's "now" to its expiry) to ExpiresIn: less the clock's
// resolution, since the clock read "now" up to that much before the moment
// it stood for, and ExpiresIn must never promise more than the record has.
// Zero when unknown or run out.
func left(micros sql.NullInt64, resolution time.Duration) time.Duration {
	if !micros.Valid {
		return 0
	}
	return max(time.Duration(micros.Int64)*time.Microsecond-resolution, 0)
}

// readRow reads the record of digest into r, with the database's verdicts
// on its clocks.
func (l *Layer) readRow(ctx context.Context, q querier, digest []byte, r *row) (bool, error) {
	if l.dialect != dialect.PG {
		return queryOne(ctx, q, l.st.read, []any{digest}, r.dest()...)
	}
	now := dbTime{wall: r.expiresAt.wall}
	found, err := queryOne(ctx, q, l.st.read, []any{digest}, r.destAt(&now)...)
	if found && err == nil {
		r.at(now.t)
	}
	return found, err
}

// queryOne runs a query expected to return at most one row and scans it into
// dest. found is false when there is no row.
func queryOne(ctx context.Context, q querier, query string, args []any, dest ...any) (found bool, err error) {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return false, err
		}
		found = true
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	return found, rows.Err()
}

// affected runs a statement and returns how many rows it changed.
func affected(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
