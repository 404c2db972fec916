package sqllayer

// MySQL and MariaDB statements. Times are DATETIME(6) in UTC; "now" is
// UTC_TIMESTAMP(6), which the server fixes at the start of each statement, so
// every use within one statement reads the same instant. Durations arrive as
// microseconds. Byte strings (keys, tokens, fingerprints, results, event and
// source IDs) are sent as hexadecimal literals by bun and compared as bytes;
// labels are converted to utf8mb4.
//
// A claim must tell its caller when its lease ends by the database's clock.
// The INSERT and the takeover UPDATE write lease_until as the epoch plus
// LAST_INSERT_ID(now in microseconds) plus the lease: LAST_INSERT_ID(expr)
// returns expr, and the server sends it back as the statement's insert ID,
// so the claim learns "now" without a second round trip. The grace UPDATE
// does the same with the grace. Statements that read a record return beside
// it how long it has left, in microseconds by the same "now" (myLeft): the
// record has expired when that is not positive, and its ExpiresIn comes
// from it. State 3 is an in-progress record in its grace.
const (
	myNowMicros = "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
	myLease     = "TIMESTAMP'1970-01-01 00:00:00' + INTERVAL (LAST_INSERT_ID(" + myNowMicros + ") + ?5) MICROSECOND"
	myGrace     = "TIMESTAMP'1970-01-01 00:00:00' + INTERVAL (LAST_INSERT_ID(" + myNowMicros + ") + ?2) MICROSECOND"
	myLeft      = "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)"
)

var mysqlStmts = stmts{
	// A plain INSERT: only error 1062 (the duplicate key) means "taken"; every
	// other error stays an error, which INSERT IGNORE would have hidden.
	insert: `INSERT INTO {R} (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
VALUES (?0, CONVERT(?1 USING utf8mb4), CONVERT(?2 USING utf8mb4), ?3, 1, ?4,
	` + myLease + `, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ?6 MICROSECOND)`,

	read: `SELECT 0, fingerprint, state, token, result, lease_until, expires_at,
	` + myLeft + `, lease_until <= UTC_TIMESTAMP(6)
FROM {R} WHERE key_digest = ?0`,

	// Assignments run left to right: expires_at reads the old expiry.
	grace: `UPDATE {R}
SET state = 3, lease_until = ` + myGrace + `,
	expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ?2 MICROSECOND)
WHERE key_digest = ?0 AND token = ?1 AND state = 1 AND fingerprint = ?3
	AND lease_until <= UTC_TIMESTAMP(6) AND expires_at > UTC_TIMESTAMP(6)`,

	takeover: `UPDATE {R}
SET scope = CONVERT(?1 USING utf8mb4), client_key = CONVERT(?2 USING utf8mb4), fingerprint = ?3, state = 1, token = ?4,
	result = NULL, lease_until = ` + myLease + `, created_at = UTC_TIMESTAMP(6),
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ?6 MICROSECOND
WHERE key_digest = ?0 AND token = ?7
	AND (expires_at <= UTC_TIMESTAMP(6) OR (state = 3 AND fingerprint = ?3 AND lease_until <= UTC_TIMESTAMP(6)))`,

	complete: `UPDATE {R}
SET state = 2, result = ?2, lease_until = NULL, expires_at = UTC_TIMESTAMP(6) + INTERVAL ?3 MICROSECOND
WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3) AND expires_at > UTC_TIMESTAMP(6)`,

	owned: `SELECT state, result FROM {R} WHERE key_digest = ?0 AND token = ?1 AND expires_at > UTC_TIMESTAMP(6)`,

	release: `DELETE FROM {R} WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3)`,

	live: `SELECT 1 FROM {R} WHERE key_digest = ?0 AND expires_at > UTC_TIMESTAMP(6)`,

	// ?3 is the lease and its grace: the record outlives both.
	renew: `UPDATE {R}
SET state = 1, lease_until = UTC_TIMESTAMP(6) + INTERVAL ?2 MICROSECOND,
	expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ?3 MICROSECOND)
WHERE key_digest = ?0 AND token = ?1 AND state IN (1, 3) AND expires_at > UTC_TIMESTAMP(6)`,

	get: `SELECT fingerprint, state, result, lease_until, expires_at, ` + myLeft + ` FROM {R}
WHERE key_digest = ?0 AND expires_at > UTC_TIMESTAMP(6)`,

	markEvent: `INSERT INTO {E} (consumer, event_id, created_at, expires_at)
VALUES (?0, ?1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ?2 MICROSECOND)`,

	eventExpired: `SELECT expires_at <= UTC_TIMESTAMP(6) FROM {E} WHERE consumer = ?0 AND event_id = ?1`,

	reviveEvent: `DELETE FROM {E} WHERE consumer = ?0 AND event_id = ?1 AND expires_at <= UTC_TIMESTAMP(6)`,

	// The affected-row count answers: 1 inserted, 2 updated to a newer
	// version, 0 an equal or older version left the row as it was.
	// Assignments run left to right, so updated_at reads the old version.
	// This needs the driver's default clientFoundRows=false: with it, an
	// unchanged row would count 1, like an insert.
	advance: `INSERT INTO {V} (source, external_id, version, updated_at)
VALUES (?0, ?1, ?2, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
	updated_at = IF(version < VALUES(version), VALUES(updated_at), updated_at),
	version = GREATEST(version, VALUES(version))`,

	version: `SELECT version FROM {V} WHERE source = ?0 AND external_id = ?1`,

	// An in-progress record goes only once its lease and grace ended too
	// (see DeleteExpired).
	sweep: [2]string{
		`DELETE FROM {R} WHERE expires_at <= UTC_TIMESTAMP(6)
	AND (state = 2 OR lease_until + INTERVAL (TIMESTAMPDIFF(MICROSECOND, created_at, lease_until) DIV 4) MICROSECOND <= UTC_TIMESTAMP(6))
ORDER BY expires_at LIMIT ?0`,
		`DELETE FROM {E} WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?0`,
	},
}
