package sqllayer

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"time"

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
	expired     sql.NullBool // expires_at has passed: the record is absent
	lapsed      sql.NullBool // lease_until has passed
}

func (l *Layer) newRow() row {
	wall := !l.native
	return row{leaseUntil: dbTime{wall: wall}, expiresAt: dbTime{wall: wall}}
}

func (r *row) dest() []any {
	return []any{&r.claimed, &r.fingerprint, &r.state, &r.token, &r.result, &r.leaseUntil, &r.expiresAt, &r.expired, &r.lapsed}
}

// takeable reports whether a claim for fingerprint fp may replace the stored
// record: it has expired (an expired record is absent, whatever it held), or
// it is in progress for the same fingerprint and its lease has lapsed.
func (r *row) takeable(fp []byte) bool {
	if r.expired.Bool {
		return true
	}
	return r.state == int64(idem.StateInProgress) && r.lapsed.Bool && bytes.Equal(r.fingerprint, fp)
}

// record returns what a non-owner sees: no token.
func (r *row) record(key idem.Key) idem.Record {
	rec := idem.Record{
		Key:         key,
		Fingerprint: string(r.fingerprint),
		State:       idem.State(r.state),
		LeaseUntil:  r.leaseUntil.t,
		ExpiresAt:   r.expiresAt.t,
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

// queryOne runs a query expected to return at most one row and scans it into
// dest. found is false when there is no row.
func queryOne(ctx context.Context, q querier, query string, args []any, dest ...any) (found bool, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
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
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
