package sqllayer

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

// DefaultAuditTable is the table where an Admin records every release and
// forget.
const DefaultAuditTable = "idem_audit"

// Admin is the operator's view of a Layer's records: read a record with
// its owner token, list the claims that look stuck, free one with a
// compare-and-set on the token read, count what the table holds. Every
// release and forget is recorded in an audit table of its own, in the same
// transaction as the change. It serves the idem command and a service that
// mounts the same operations behind its own admin authentication; the
// library exposes no endpoint of its own.
//
// An Admin is safe for concurrent use and holds no resources: the Layer's
// *bun.DB stays the caller's.
type Admin struct {
	l     *Layer
	audit string
	st    adminStmts
}

// WithAuditTable names the table where the layer's Admin records every
// release and forget. Default DefaultAuditTable. Same rules as
// WithRecordsTable; it must differ from the layer's other tables. Only
// Admin.Init creates it: a layer whose Admin is never used never needs it.
func WithAuditTable(name string) Option {
	return func(c *config) error { c.audit = name; return nil }
}

func (l *Layer) validateAudit() error {
	switch {
	case !tableName.MatchString(l.audit) || (l.sqlite && strings.Contains(l.audit, ".")):
		return fmt.Errorf("WithAuditTable: give a name of letters, digits and underscores (at most 48), optionally after a schema and a dot but not on SQLite (got %q)", l.audit)
	case l.audit == l.names.records || l.audit == l.names.events || l.audit == l.names.versions:
		return fmt.Errorf("WithAuditTable: give a name none of the layer's other tables has (got %q)", l.audit)
	}
	return nil
}

// Admin returns the operator's view of the layer's records (see Admin),
// recording in the table WithAuditTable names. It does no I/O: call its
// Init once to create that table.
func (l *Layer) Admin() *Admin {
	return &Admin{l: l, audit: l.audit, st: newAdminStmts(l.dialect, l.names, l.audit, l.native)}
}

// Init creates the audit table and its index if they are missing. Like
// Layer.Init it is idempotent and safe to run from many instances at once.
func (a *Admin) Init(ctx context.Context) error {
	return a.l.wrapOn("init", []string{a.audit}, a.l.apply(ctx, "sqllayer:init:"+a.audit, a.st.ddl))
}

// Schema returns the statements Init runs, in order, for users who apply
// their own migrations. Each is idempotent (IF NOT EXISTS).
func (a *Admin) Schema() []string { return append([]string(nil), a.st.ddl...) }

// AuditTable returns the name of the audit table.
func (a *Admin) AuditTable() string { return a.audit }

// Entry is a stored record as an operator sees it, with the owner token
// that a release compares and the database's clock when it was read.
type Entry struct {
	// Key is the record's key, from its digest: it has no labels.
	Key idem.Key
	// Scope and ClientKey are the labels stored for operators, cut to 255
	// bytes (invalid UTF-8 replaced). ClientKey may be sensitive.
	Scope, ClientKey string
	// Fingerprint is what the first request meant.
	Fingerprint string
	// State is idem.StateInProgress or idem.StateCompleted.
	State idem.State
	// Grace is set for an in-progress claim whose lapsed lease a Reserve
	// extended by a grace: it is taken over once that lapses too.
	Grace bool
	// Token is the owner token of the claim (kept once completed).
	Token string
	// Result is the stored result of a completed record.
	Result []byte
	// CreatedAt is when the current claim was made; LeaseUntil when it
	// lapses (zero once completed); ExpiresAt when the record is
	// forgotten. Now is the database's clock when the record was read:
	// compare the others with it, not with the application's clock.
	CreatedAt, LeaseUntil, ExpiresAt, Now time.Time
}

// Expired reports whether the record's expiry has passed: it is absent for
// every Reserve and Get, and waits for the janitor.
func (e Entry) Expired() bool { return !e.ExpiresAt.After(e.Now) }

// LeaseLeft returns how long an in-progress claim's lease has left, negative
// when it lapsed; zero for a completed record.
func (e Entry) LeaseLeft() time.Duration {
	if e.State != idem.StateInProgress {
		return 0
	}
	return e.LeaseUntil.Sub(e.Now)
}

// Age returns how long ago the current claim was made.
func (e Entry) Age() time.Duration { return e.Now.Sub(e.CreatedAt) }

// scanEntry reads the columns of entryColumns.
func (a *Admin) scanEntry(rows Rows) (Entry, error) {
	var (
		e                    Entry
		digest, fp, tok, res []byte
		state                int64
		wall                 = !a.l.native
		created, lease, exp  = dbTime{wall: wall}, dbTime{wall: wall}, dbTime{wall: wall}
		now                  = dbTime{wall: wall}
	)
	if err := rows.Scan(&digest, &e.Scope, &e.ClientKey, &fp, &state, &tok, &res, &created, &lease, &exp, &now); err != nil {
		return e, err
	}
	if len(digest) != idem.KeySize {
		return e, fmt.Errorf("sqllayer: a key digest of %d bytes", len(digest))
	}
	e.Key = idem.KeyFromDigest([idem.KeySize]byte(digest))
	e.Fingerprint, e.Token = string(fp), string(tok)
	e.State, e.Grace = idem.State(state), state == stateGrace
	if inProgress(state) {
		e.State = idem.StateInProgress
	} else {
		e.Result = res
		if e.Result == nil {
			e.Result = []byte{}
		}
	}
	e.CreatedAt, e.LeaseUntil, e.ExpiresAt, e.Now = created.t, lease.t, exp.t, now.t
	return e, nil
}

// entries runs an operator's read and returns its records.
func (a *Admin) entries(ctx context.Context, op, query string, args ...any) ([]Entry, error) {
	var out []Entry
	err := a.l.retry(ctx, func() error {
		out = out[:0]
		rows, err := a.l.pool().query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := a.scanEntry(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, a.l.wrap(op, err)
}

// Inspect returns the record of key as stored, expired or not (see
// Entry.Expired), with its owner token; idem.ErrNotFound when there is no
// row.
func (a *Admin) Inspect(ctx context.Context, key idem.Key) (Entry, error) {
	if err := a.l.check(ctx, key); err != nil {
		return Entry{}, err
	}
	d := key.Digest()
	es, err := a.entries(ctx, "inspect", a.st.inspect, d[:])
	if err != nil {
		return Entry{}, err
	}
	if len(es) == 0 {
		return Entry{}, idem.ErrNotFound
	}
	return es[0], nil
}

// Stuck returns at most limit in-progress claims whose lease has lapsed
// (within a grace or past it: no owner renewed them in time) or that were
// made at least olderThan ago (an owner that keeps renewing work that never
// ends), oldest claim first. olderThan 0 lists every in-progress claim;
// limit must be positive. No index covers the question: it reads the
// table, as an operator's command may, and a request's path must not.
func (a *Admin) Stuck(ctx context.Context, olderThan time.Duration, limit int) ([]Entry, error) {
	if limit <= 0 || olderThan < 0 {
		return nil, fmt.Errorf("sqllayer: Stuck needs a positive limit and an age of 0 or more (got %d, %v)", limit, olderThan)
	}
	return a.entries(ctx, "list stuck", a.st.stuck, micros(olderThan), limit)
}

// Outcome is what a release or a forget did to one tier's record.
type Outcome string

const (
	// Freed: the record read was deleted; the next Reserve claims the key.
	Freed Outcome = "freed"
	// Changed: the record is no longer the one read (another token, or it
	// completed, or a completed record was claimed again): nothing changed.
	Changed Outcome = "changed"
	// Absent: there was no record: nothing changed.
	Absent Outcome = "absent"
)

// Release frees the in-progress claim e (read with Inspect or Stuck), in
// one transaction with its audit row: a compare-and-set on e's token, so
// that a claim that completed or was taken over since it was read is left
// as it is (Changed) and its owner's result wins. An in-progress claim
// freed this way runs again on the next retry; its owner, if it still
// runs, gets idem.ErrLeaseLost when it completes.
func (a *Admin) Release(ctx context.Context, e Entry, n Note) (Outcome, error) {
	return a.change(ctx, "release", a.l.st.release, e, n)
}

// Forget deletes the completed record e (read with Inspect), in one
// transaction with its audit row, so that the next retry runs the work
// again: what it did is forgotten. A record that changed since it was read
// is left as it is (Changed), and so is an in-progress one. A Store's
// local cache may replay the forgotten answer until its short TTL ends.
func (a *Admin) Forget(ctx context.Context, e Entry, n Note) (Outcome, error) {
	return a.change(ctx, "forget", a.st.forget, e, n)
}

func (a *Admin) change(ctx context.Context, action, stmt string, e Entry, n Note) (Outcome, error) {
	if err := a.l.check(ctx, e.Key); err != nil {
		return "", err
	}
	if err := n.valid(); err != nil {
		return "", err
	}
	d := e.Key.Digest()
	var out Outcome
	err := a.l.retry(ctx, func() error {
		return a.l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			q, err := a.l.on(tx)
			if err != nil {
				return err
			}
			deleted, err := affected(ctx, q, stmt, d[:], bin(e.Token))
			switch {
			case err != nil:
				return err
			case deleted == 1:
				out = Freed
			default:
				found, err := queryOne(ctx, q, a.st.exists, []any{d[:]}, new(int))
				if err != nil {
					return err
				}
				out = Absent
				if found {
					out = Changed
				}
			}
			return a.note(ctx, q, AuditEntry{Note: n, Action: action, Tier: idem.TierSQL, Outcome: out,
				Key: e.Key, Scope: e.Scope, ClientKey: e.ClientKey, Token: e.Token})
		})
	})
	if err != nil {
		return "", a.l.wrap(action, err)
	}
	return out, nil
}

// Stats counts a records table by state.
type Stats struct {
	// InProgress and Completed count the live records; Grace is how many of
	// the in-progress ones are within a grace.
	InProgress, Grace, Completed int64
	// Expired counts the rows past their expiry that wait for the janitor
	// (an in-progress one until its lease and grace end too), and
	// OldestExpiry is the earliest expiry among them (zero when none): the
	// janitor has not swept since at least then.
	Expired      int64
	OldestExpiry time.Time
	// OldestClaim is when the oldest live in-progress claim was made (zero
	// when none).
	OldestClaim time.Time
	// Bytes is the table's size with its indexes (SQLite: the database
	// file's, which holds every table); -1 when the database would not say.
	Bytes int64
	// Now is the database's clock.
	Now time.Time
	// LastSweep is the janitor's last run as the audit table recorded it
	// (Layer.RecordSweep): At, By (the host), Outcome (Swept or
	// SweepFailed) and Reason (what it deleted, or why it failed). Its At
	// is zero when the janitor recorded none, or there is no audit table.
	LastSweep AuditEntry
}

// Stats counts the records table by state in one scan of it: meant for an
// operator, not for a metric scraped every few seconds on a large table.
func (a *Admin) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	var s Stats
	err := a.l.retry(ctx, func() error {
		s = Stats{Bytes: -1}
		rows, err := a.l.pool().query(ctx, a.st.stats)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var state, expired, count int64
			wall := !a.l.native
			exp, created, now := dbTime{wall: wall}, dbTime{wall: wall}, dbTime{wall: wall}
			if err := rows.Scan(&state, &expired, &count, &exp, &created, &now); err != nil {
				return err
			}
			s.Now = now.t
			switch {
			case expired == 1:
				s.Expired += count
				if s.OldestExpiry.IsZero() || exp.t.Before(s.OldestExpiry) {
					s.OldestExpiry = exp.t
				}
			case state == 2:
				s.Completed += count
			default:
				s.InProgress += count
				if state == stateGrace {
					s.Grace += count
				}
				if s.OldestClaim.IsZero() || created.t.Before(s.OldestClaim) {
					s.OldestClaim = created.t
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return Stats{}, a.l.wrap("stats", err)
	}
	var args []any
	if a.l.dialect != dialect.SQLite {
		schema, table, ok := strings.Cut(a.l.names.records, ".")
		if !ok {
			schema, table = "", schema
		}
		args = []any{table, schema}
	}
	var size sql.NullInt64
	if found, err := queryOne(ctx, a.l.pool(), a.st.size, args, &size); err == nil && found && size.Valid {
		s.Bytes = size.Int64
	}
	if s.LastSweep, err = a.lastSweep(ctx); err != nil {
		return Stats{}, a.l.wrap("stats", err)
	}
	return s, nil
}
