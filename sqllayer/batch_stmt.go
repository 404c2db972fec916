package sqllayer

import (
	"strconv"
	"strings"
	"sync"

	"github.com/uptrace/bun/dialect"
)

// MUST AGREE with the single statements (stmt_postgres.go,
// stmt_mysql.go, stmt_sqlite.go): a batched statement decides each key as
// the single ones decide it. FuzzBatchAgreesWithSingle (batch_fuzz_test.go)
// and FuzzEventBatchAgreesWithSingle (batch_events_fuzz_test.go) compare
// them under make test.

// Batched statements. On Postgres each has one text whatever the number
// of rows: a batch's column travels as one array argument and unnest turns
// the arrays back into rows, so that pgx prepares the statement once per
// connection and the server parses it once. Elsewhere the text depends on
// how many rows a statement carries, so each is generated for a count on
// first use and kept (stmtCache). They reuse the per-dialect pieces of the
// single statements (stmt_*.go): the same columns, clocks and guards, for
// many keys at once.
//
// Claims:      a multi-row INSERT that tolerates only the duplicate key,
//              returning the keys it inserted (Postgres, SQLite: ON CONFLICT
//              DO NOTHING RETURNING; MySQL and MariaDB: ON DUPLICATE KEY
//              UPDATE of nothing, then one read of the batch's keys), and
//              one read of the keys that were taken.
// Completions: one compare-and-set UPDATE on each key's token (Postgres:
//              UPDATE … FROM the rows it finds by key, see below; SQLite:
//              UPDATE … FROM a WITH of VALUES; MySQL: a multi-table UPDATE
//              joined to the batch's rows, then one read when it changed
//              fewer rows than it carried, which tells the rows it
//              changed from a completion re-sent, see completeMySQL).
// Events:      a multi-row INSERT of one consumer's event IDs, as
//              MarkProcessed's but for many; on Postgres the same statement
//              also reads the rows of the IDs it did not insert; on SQLite
//              the IDs travel as one JSON array, so that its text too is
//              the same for every count.
//
// On Postgres every read of a batch's rows looks each key up on its own,
// in a LATERAL subquery that the planner cannot fold into a join: a join
// of the batch's rows to the table is planned once per connection (pgx
// caches the prepared statement and the server its generic plan), and a
// plan made while the table was small scans the whole table for every
// batch once it has grown. The completion UPDATE then changes the rows it
// found by their ctid: a row that changed since (a renewal, a release)
// has another ctid and is skipped, and its caller's own statements decide.

// stmtCache holds one batched statement per row count, or one for every
// count.
type stmtCache struct {
	fixed string // the statement for every count, when set
	mu    sync.Mutex
	m     map[int]string
	gen   func(n int) string
}

func newStmtCache(n names, native bool, gen func(n int) string) *stmtCache {
	return &stmtCache{m: map[int]string{}, gen: func(rows int) string {
		q := n.expand(gen(rows))
		if native {
			q = dollars(q)
		}
		return q
	}}
}

func (c *stmtCache) get(n int) string {
	if c.fixed != "" {
		return c.fixed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.m[n]
	if !ok {
		q = c.gen(n)
		c.m[n] = q
	}
	return q
}

// batchStmts are a Layer's batched statements.
type batchStmts struct {
	claim     *stmtCache // claims: rows of 7 arguments, as claim.args (Postgres: 7 arrays)
	readMany  *stmtCache // the read statement's columns, after key_digest, for n keys
	complete  *stmtCache // completions: rows of (key, token, result, ttl) (Postgres: 4 arrays)
	ownedMany *stmtCache // MySQL: key_digest, state, token, result, liveness and expiry (µs) of the records of n keys
	mark      *stmtCache // events: ?0 consumer, ?1 retention, then n event IDs (Postgres: an array)
	marked    *stmtCache // events (SQLite, MySQL): event_id and whether it expired, for ?0 and n IDs
	revive    *stmtCache // events: delete the expired rows of ?0 among n IDs

	claimAndComplete *stmtCache // Postgres: claims (?0…?6) and completions (?7…?10) in one statement
}

// writeRow writes one parenthesised row of width placeholders from ?first,
// each formatted by f.
func writeRow(b *strings.Builder, first, width int, f func(i int, p string) string) {
	b.WriteByte('(')
	for i := range width {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f(i, "?"+strconv.Itoa(first+i)))
	}
	b.WriteByte(')')
}

// writeList writes n placeholders from ?first, separated by commas.
func writeList(b *strings.Builder, first, n int) {
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?" + strconv.Itoa(first+i))
	}
}

// writeRows writes n rows of width placeholders, the first at ?first.
func writeRows(b *strings.Builder, first, n, width int, f func(i int, p string) string) {
	for r := range n {
		if r > 0 {
			b.WriteString(",\n\t")
		}
		writeRow(b, first+r*width, width, f)
	}
}

func plain(_ int, p string) string { return p }

const recordCols = "key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at"

func newBatchStmts(d dialect.Name, n names, native bool) batchStmts {
	var b batchStmts
	mk := func(gen func(int) string) *stmtCache { return newStmtCache(n, native, gen) }
	switch d {
	case dialect.PG:
		fixed := func(q string) *stmtCache { return &stmtCache{fixed: dollars(n.expand(q))} }
		b.claim = fixed(pgClaimMany)
		b.readMany = fixed(pgReadMany)
		b.complete = fixed(pgCompleteMany)
		b.mark = fixed(pgMarkMany)
		b.revive = fixed(pgReviveMany)
		b.claimAndComplete = fixed(pgClaimAndComplete())
	case dialect.SQLite:
		b.claim = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("INSERT INTO {R} (" + recordCols + ") VALUES\n\t")
			writeRows(&s, 0, n, 7, func(i int, p string) string {
				switch i {
				case 4:
					return "1, " + p
				case 5:
					return liteNow + " + " + p + ", " + liteNow
				case 6:
					return liteNow + " + " + p
				}
				return p
			})
			s.WriteString("\nON CONFLICT (key_digest) DO NOTHING\nRETURNING key_digest, lease_until, expires_at")
			return s.String()
		})
		b.readMany = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("SELECT key_digest, 0, fingerprint, state, token, result, lease_until, expires_at,\n\t" +
				liteLeft + ", lease_until <= " + liteNow + "\nFROM {R} WHERE key_digest IN (")
			writeList(&s, 0, n)
			s.WriteString(")")
			return s.String()
		})
		b.complete = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("WITH v(k, t, res, ttl) AS (VALUES ")
			writeRows(&s, 0, n, 4, plain)
			s.WriteString(")\nUPDATE {R} SET state = 2, result = v.res, lease_until = NULL, expires_at = " + liteNow + " + v.ttl\n" +
				"FROM v WHERE {R}.key_digest = v.k AND {R}.token = v.t AND {R}.state IN (1, 3) AND {R}.expires_at > " + liteNow +
				"\nRETURNING key_digest")
			return s.String()
		})
		// The IDs travel as one JSON array (liteMarkMany).
		b.mark = &stmtCache{fixed: dollars(n.expand(liteMarkMany))}
		b.marked = mk(func(n int) string { return eventsIn("SELECT event_id, expires_at <= "+liteNow+" FROM {E}", n) })
		b.revive = mk(func(n int) string { return eventsIn("DELETE FROM {E}", n) + " AND expires_at <= " + liteNow })
	case dialect.MySQL:
		// An update of the key to itself changes nothing (0 rows) and, unlike
		// INSERT IGNORE, tolerates only the duplicate key.
		b.claim = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("INSERT INTO {R} (" + recordCols + ") VALUES\n\t")
			writeRows(&s, 0, n, 7, func(i int, p string) string {
				switch i {
				case 1, 2:
					return "CONVERT(" + p + " USING utf8mb4)"
				case 4:
					return "1, " + p
				case 5:
					return "UTC_TIMESTAMP(6) + INTERVAL " + p + " MICROSECOND, UTC_TIMESTAMP(6)"
				case 6:
					return "UTC_TIMESTAMP(6) + INTERVAL " + p + " MICROSECOND"
				}
				return p
			})
			s.WriteString("\nON DUPLICATE KEY UPDATE key_digest = key_digest")
			return s.String()
		})
		b.readMany = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("SELECT key_digest, 0, fingerprint, state, token, result, lease_until, expires_at,\n\t" +
				myLeft + ", lease_until <= UTC_TIMESTAMP(6)\nFROM {R} WHERE key_digest IN (")
			writeList(&s, 0, n)
			s.WriteString(")")
			return s.String()
		})
		b.complete = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("UPDATE {R} AS r JOIN (")
			for i := range n {
				if i > 0 {
					s.WriteString("\n\tUNION ALL ")
				}
				p := func(j int) string { return "?" + strconv.Itoa(4*i+j) }
				if i == 0 {
					s.WriteString("SELECT " + p(0) + " AS k, " + p(1) + " AS t, " + p(2) + " AS res, " + p(3) + " AS ttl")
				} else {
					s.WriteString("SELECT " + p(0) + ", " + p(1) + ", " + p(2) + ", " + p(3))
				}
			}
			s.WriteString(") AS v ON r.key_digest = v.k AND r.token = v.t\n" +
				"SET r.state = 2, r.result = v.res, r.lease_until = NULL, r.expires_at = UTC_TIMESTAMP(6) + INTERVAL v.ttl MICROSECOND\n" +
				"WHERE r.state IN (1, 3) AND r.expires_at > UTC_TIMESTAMP(6)")
			return s.String()
		})
		b.ownedMany = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("SELECT key_digest, state, token, result, expires_at > UTC_TIMESTAMP(6),\n\t" +
				"TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at) FROM {R} WHERE key_digest IN (")
			writeList(&s, 0, n)
			s.WriteString(")")
			return s.String()
		})
		// A plain INSERT, as MarkProcessed's: only error 1062 means a
		// duplicate, and then MarkProcessedBatch finds which.
		b.mark = mk(func(n int) string {
			var s strings.Builder
			s.WriteString("INSERT INTO {E} (consumer, event_id, created_at, expires_at) VALUES\n\t")
			writeRows(&s, 2, n, 1, func(_ int, p string) string {
				return "?0, " + p + ", UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ?1 MICROSECOND"
			})
			return s.String()
		})
		b.marked = mk(func(n int) string { return eventsIn("SELECT event_id, expires_at <= UTC_TIMESTAMP(6) FROM {E}", n) })
		b.revive = mk(func(n int) string { return eventsIn("DELETE FROM {E}", n) + " AND expires_at <= UTC_TIMESTAMP(6)" })
	}
	return b
}

// liteMarkMany inserts the event IDs of the JSON array ?2 for consumer ?0,
// kept for ?1 microseconds, and returns those it inserted. One text for
// every count, read by the clock once: a row of VALUES per ID, each with
// its own clock, cost SQLite more to parse and plan than to run. (The
// WHERE lets SQLite tell the ON CONFLICT of the upsert from a join's ON.)
const liteMarkMany = `INSERT INTO {E} (consumer, event_id, created_at, expires_at)
SELECT ?0, v.value, c.now, c.now + ?1 FROM json_each(?2) AS v, (SELECT ` + liteNow + ` AS now) AS c WHERE true
ON CONFLICT (consumer, event_id) DO NOTHING
RETURNING event_id`

// eventsIn completes head with the rows of consumer ?0 among n event IDs
// from ?1.
func eventsIn(head string, n int) string {
	var s strings.Builder
	s.WriteString(head + " WHERE consumer = ?0 AND event_id IN (")
	writeList(&s, 1, n)
	s.WriteString(")")
	return s.String()
}
