package bench

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// rawSQL is the hand-written baseline: the statements a careful engineer
// would write for the same table, sent straight to the driver.
type rawSQL struct {
	db                  *sql.DB
	insert, update, sel string
	args                func(k idem.Key, token []byte) []any
	updateArgs          func(k idem.Key, token []byte) []any
}

func newRawSQL(db *bun.DB, table string) *rawSQL {
	r := &rawSQL{db: db.DB}
	if db.Dialect().Name() == dialect.PG {
		r.insert = `INSERT INTO ` + table + ` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
VALUES ($1, '', '', $2, 1, $3, clock_timestamp() + interval '30 seconds', clock_timestamp(), clock_timestamp() + interval '5 minutes') ON CONFLICT DO NOTHING`
		r.update = `UPDATE ` + table + ` SET state = 2, result = $1, lease_until = NULL, expires_at = clock_timestamp() + interval '5 minutes' WHERE key_digest = $2 AND token = $3`
		r.sel = `SELECT fingerprint, state, result, lease_until, expires_at FROM ` + table + ` WHERE key_digest = $1`
		r.args = func(k idem.Key, token []byte) []any { d := k.Digest(); return []any{d[:], []byte(fp), token} }
		r.updateArgs = func(k idem.Key, token []byte) []any { d := k.Digest(); return []any{result, d[:], token} }
		return r
	}
	// SQLite: integer microseconds, as sqllayer stores them.
	r.insert = `INSERT INTO ` + table + ` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
VALUES (?, '', '', ?, 1, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	r.update = `UPDATE ` + table + ` SET state = 2, result = ?, lease_until = NULL, expires_at = ? WHERE key_digest = ? AND token = ?`
	r.sel = `SELECT fingerprint, state, result, lease_until, expires_at FROM ` + table + ` WHERE key_digest = ?`
	r.args = func(k idem.Key, token []byte) []any {
		d, now := k.Digest(), time.Now().UnixMicro()
		return []any{d[:], []byte(fp), token, now + lease.Microseconds(), now, now + retention.Microseconds()}
	}
	r.updateArgs = func(k idem.Key, token []byte) []any {
		d := k.Digest()
		return []any{result, time.Now().Add(retention).UnixMicro(), d[:], token}
	}
	return r
}

func (r *rawSQL) newKey(ctx context.Context, k idem.Key, token []byte) error {
	if _, err := r.db.ExecContext(ctx, r.insert, r.args(k, token)...); err != nil {
		return err
	}
	_, err := r.db.ExecContext(ctx, r.update, r.updateArgs(k, token)...)
	return err
}

func (r *rawSQL) selectKey(ctx context.Context, k idem.Key) error {
	var (
		f, res     []byte
		state      int
		lease, exp any
	)
	d := k.Digest()
	return r.db.QueryRowContext(ctx, r.sel, d[:]).Scan(&f, &state, &res, &lease, &exp)
}

// BenchmarkSQL puts the SQL layer next to hand-written statements on the
// same pool, table and concurrency.
//
//	op=new        baseline: INSERT … ON CONFLICT DO NOTHING, then UPDATE … WHERE key AND token
//	              idem:     Reserve + Complete of a fresh key
//	op=duplicate  baseline: SELECT of the row by primary key
//	              idem:     Reserve on a completed key (a read, never a write)
func BenchmarkSQL(b *testing.B) {
	db, table := dbFor(b)
	l := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(table), sqllayer.WithEventsTable(testenv.Name("e")), sqllayer.WithVersionsTable(testenv.Name("v"))))(b)
	raw := newRawSQL(db, table)
	token := []byte(idem.NewToken())
	dup := completedKey(b, l)
	benchLayer(b, l, dup,
		func(ctx context.Context) error { return raw.newKey(ctx, freshKey(), token) },
		func(ctx context.Context) error { return raw.selectKey(ctx, dup) })
}
