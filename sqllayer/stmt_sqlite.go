package sqllayer

// SQLite statements. Times are INTEGER microseconds since the Unix epoch
// (UTC); "now" is SQLite's own clock, unixepoch('subsec') (millisecond
// resolution), which SQLite holds constant within one statement step.
// Statements that read a record return beside it how long it has left, in
// microseconds by the same "now" (liteLeft): the record has expired when
// that is not positive, and its ExpiresIn comes from it. State 3 is an
// in-progress record in its grace.
//
// Reserve always reads first here, whatever the order: SQLite has one
// writer at a time and an INSERT takes the write lock even when it
// conflicts, so a duplicate that read first never waits for the writer.
const (
	liteNow  = "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)"
	liteLeft = "expires_at - " + liteNow
)

var sqliteStmts = stmts{
	insert: `INSERT INTO {R} (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
VALUES (?0, ?1, ?2, ?3, 1, ?4, ` + liteNow + ` + ?5, ` + liteNow + `, ` + liteNow + ` + ?6)
ON CONFLICT (key_digest) DO NOTHING
RETURNING lease_until, expires_at`,

	read: `SELECT 0, fingerprint, state, token, result, lease_until, expires_at,
	` + liteLeft + `, lease_until <= ` + liteNow + `
FROM {R} WHERE key_digest = ?0`,

	grace: `UPDATE {R}
SET state = 3, lease_until = ` + liteNow + ` + ?2, expires_at = max(expires_at, ` + liteNow + ` + ?2)
WHERE key_digest = ?0 AND token = ?1 AND state = 1 AND fingerprint = ?3
	AND lease_until <= ` + liteNow + ` AND expires_at > ` + liteNow + `
RETURNING lease_until, expires_at, ` + liteLeft,

	takeover: `UPDATE {R}
SET scope = ?1, client_key = ?2, fingerprint = ?3, state = 1, token = ?4, result = NULL,
	lease_until = ` + liteNow + ` + ?5, created_at = ` + liteNow + `, expires_at = ` + liteNow + ` + ?6
WHERE key_digest = ?0 AND token = ?7
	AND (expires_at <= ` + liteNow + ` OR (state = 3 AND fingerprint = ?3 AND lease_until <= ` + liteNow + `))
RETURNING lease_until, expires_at`,

	complete: `UPDATE {R}
SET state = 2, result = ?2, lease_until = NULL, expires_at = ` + liteNow + ` + ?3
WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3) AND expires_at > ` + liteNow,

	owned: `SELECT state, result FROM {R} WHERE key_digest = ?0 AND token = ?1 AND expires_at > ` + liteNow,

	release: `DELETE FROM {R} WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3)`,

	live: `SELECT 1 FROM {R} WHERE key_digest = ?0 AND expires_at > ` + liteNow,

	// ?3 is the lease and its grace: the record outlives both.
	renew: `UPDATE {R}
SET state = 1, lease_until = ` + liteNow + ` + ?2, expires_at = max(expires_at, ` + liteNow + ` + ?3)
WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3) AND expires_at > ` + liteNow,

	get: `SELECT fingerprint, state, result, lease_until, expires_at, ` + liteLeft + ` FROM {R}
WHERE key_digest = ?0 AND expires_at > ` + liteNow,

	markEvent: `INSERT INTO {E} (consumer, event_id, created_at, expires_at)
VALUES (?0, ?1, ` + liteNow + `, ` + liteNow + ` + ?2)
ON CONFLICT (consumer, event_id) DO NOTHING`,

	eventExpired: `SELECT expires_at <= ` + liteNow + ` FROM {E} WHERE consumer = ?0 AND event_id = ?1`,

	reviveEvent: `DELETE FROM {E} WHERE consumer = ?0 AND event_id = ?1 AND expires_at <= ` + liteNow,

	// As on Postgres: 1 row inserted or updated to a newer version, 0 rows
	// when the WHERE of DO UPDATE keeps an equal or newer stored version.
	advance: `INSERT INTO {V} AS v (source, external_id, version, updated_at)
VALUES (?0, ?1, ?2, ` + liteNow + `)
ON CONFLICT (source, external_id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
WHERE v.version < excluded.version`,

	version: `SELECT version FROM {V} WHERE source = ?0 AND external_id = ?1`,

	// An in-progress record goes only once its lease and grace ended too
	// (see DeleteExpired).
	sweep: [2]string{
		`DELETE FROM {R} WHERE rowid IN (SELECT rowid FROM {R} WHERE expires_at <= ` + liteNow + `
	AND (state = 2 OR lease_until + (lease_until - created_at) / 4 <= ` + liteNow + `) LIMIT ?0)`,
		`DELETE FROM {E} WHERE rowid IN (SELECT rowid FROM {E} WHERE expires_at <= ` + liteNow + ` LIMIT ?0)`,
	},
}
