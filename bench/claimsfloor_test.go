package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// claimSlots is how many batched statements a Layer keeps in flight at
// most (sqllayer's batchSlots): the floor of batched claims runs as many.
const claimSlots = 4

// claimsFloor is op=new's impl=floor in BenchmarkSQLBatch at n concurrent
// requests: what the server costs for the same new keys when every
// statement the layer may have in flight goes out full. Where commits are
// the cost, fewer and fuller statements than these can cost less: a
// reference for batching, not a bound on it. n
// requests wait for at most n claims or completions at a time, shared by at
// most claimSlots statements; so claimSlots goroutines each send, in a
// loop, one hand-written statement that claims n/(2·claimSlots) fresh keys
// and completes as many it claimed the round before (on Postgres one
// statement, a writable CTE; elsewhere the two statements in one
// transaction). No queue, no per-caller answer, no read of what was there:
// a new key is never taken. One op is one key, claimed and completed; each
// statement's counts are checked, so the floor cannot skip work.
type claimsFloor struct {
	db    *bun.DB
	table string
	per   int // keys claimed, and completed, per statement
	token []byte
}

func newClaimsFloor(db *bun.DB, table string, n int, token []byte) *claimsFloor {
	return &claimsFloor{db: db, table: table, per: max(1, n/(2*claimSlots)), token: token}
}

// run measures the floor: each op one key.
func (f *claimsFloor) run(b *testing.B) {
	b.ReportAllocs()
	b.SetParallelism(max(1, claimSlots/runtime.GOMAXPROCS(0)))
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		var prev [][]byte
		for {
			keys := make([][]byte, 0, f.per)
			for len(keys) < f.per && pb.Next() {
				d := freshKey().Digest()
				keys = append(keys, d[:])
			}
			if len(keys) == 0 && len(prev) == 0 {
				return
			}
			if err := f.round(ctx, keys, prev); err != nil {
				b.Error(err)
				return
			}
			if len(keys) == 0 {
				return
			}
			prev = keys
		}
	})
}

// round claims claim and completes complete (claimed by the last round),
// and checks that every row was written.
func (f *claimsFloor) round(ctx context.Context, claim, complete [][]byte) error {
	var inserted, updated int64
	if f.db.Dialect().Name() == dialect.PG {
		if claim == nil {
			claim = [][]byte{}
		}
		if complete == nil {
			complete = [][]byte{}
		}
		err := f.db.DB.QueryRowContext(ctx, `WITH ins AS (
	INSERT INTO `+f.table+` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
	SELECT v.k, '', '', $2, 1, $3, clock_timestamp() + interval '30 seconds', clock_timestamp(), clock_timestamp() + interval '5 minutes'
	FROM unnest($1::bytea[]) AS v(k)
	ON CONFLICT DO NOTHING RETURNING 1),
upd AS (
	UPDATE `+f.table+` AS r SET state = 2, result = $4, lease_until = NULL, expires_at = clock_timestamp() + interval '5 minutes'
	FROM unnest($5::bytea[]) AS v(k) WHERE r.key_digest = v.k AND r.token = $3 RETURNING 1)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM upd)`,
			claim, []byte(fp), f.token, result, complete).Scan(&inserted, &updated)
		if err != nil {
			return err
		}
	} else {
		tx, err := f.db.DB.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		now := time.Now().UnixMicro()
		if len(claim) > 0 {
			args := make([]any, 0, 6*len(claim))
			for _, k := range claim {
				args = append(args, k, []byte(fp), f.token, now+lease.Microseconds(), now, now+retention.Microseconds())
			}
			r, err := tx.ExecContext(ctx, `INSERT INTO `+f.table+` (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at) VALUES `+
				strings.TrimSuffix(strings.Repeat("(?, '', '', ?, 1, ?, ?, ?, ?), ", len(claim)), ", ")+` ON CONFLICT DO NOTHING`, args...)
			if err != nil {
				return err
			}
			inserted, _ = r.RowsAffected()
		}
		if len(complete) > 0 {
			args := []any{result, now + retention.Microseconds(), f.token}
			for _, k := range complete {
				args = append(args, k)
			}
			r, err := tx.ExecContext(ctx, `UPDATE `+f.table+` SET state = 2, result = ?, lease_until = NULL, expires_at = ? WHERE token = ? AND key_digest IN (`+
				strings.TrimSuffix(strings.Repeat("?, ", len(complete)), ", ")+`)`, args...)
			if err != nil {
				return err
			}
			updated, _ = r.RowsAffected()
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if inserted != int64(len(claim)) || updated != int64(len(complete)) {
		return fmt.Errorf("floor: claimed %d of %d, completed %d of %d", inserted, len(claim), updated, len(complete))
	}
	return nil
}
