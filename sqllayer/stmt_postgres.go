package sqllayer

// Postgres statements. Times are timestamptz; "now" is clock_timestamp(), the
// wall clock of the server, read once per statement through the one-row
// relation c where one instant must serve several columns. Durations arrive
// as bigint microseconds. The janitor compares with now() instead, which is
// stable within its statement and so lets the expires_at index answer.
//
// Statements that read a record return beside it how long it has left, in
// microseconds by the same "now" as their verdict on its lease (pgLeft): the
// record has expired when that is not positive, and its ExpiresIn comes
// from it. Reserve's read (read, and the batches' pgReadMany) returns the
// server's "now" instead, from which the layer derives the same verdicts
// exactly (row.at): numeric arithmetic on the server cost a duplicate a
// fifth of its time. State 3 is an in-progress record in its grace (see
// grace below).
//
// pgClaimOrRead is Reserve's single statement in the OrderOneRoundTrip order: the
// INSERT … ON CONFLICT DO NOTHING claims a free key; when it conflicts, the
// second branch returns the existing row with the database's verdict on its
// expiry (how long it has left) and lease. When the INSERT had to wait for
// a concurrent claim that then committed, the second branch reads with the
// snapshot taken before that wait and finds nothing: the caller then reads
// in a new statement.
//
// Both claims (this one and insert) bound their wait for a lock on the key
// — an atomic execution's claim, uncommitted in its open transaction — to
// ?7 (lock_timeout, for the statement's own transaction: the layer sends
// them outside any), so that the claim learns the key is held before its
// SQL timeout cuts it off (see lockwait).
const pgClaimOrRead = `WITH c AS (SELECT clock_timestamp() AS now, set_config('lock_timeout', ?7::text, true) AS bound),
ins AS (
	INSERT INTO {R} (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
	SELECT ?0::bytea, ?1::text, ?2::text, ?3::bytea, 1, ?4::bytea,
		c.now + ?5::bigint * interval '1 microsecond', c.now, c.now + ?6::bigint * interval '1 microsecond'
	FROM c WHERE c.bound IS NOT NULL
	ON CONFLICT (key_digest) DO NOTHING
	RETURNING lease_until, expires_at
)
SELECT true, NULL::bytea, 1::smallint, NULL::bytea, NULL::bytea, ins.lease_until, ins.expires_at, NULL::bigint, false FROM ins
UNION ALL
SELECT false, r.fingerprint, r.state, r.token, r.result, r.lease_until, r.expires_at,
	` + pgLeft + `, r.lease_until <= c.now
FROM {R} r, c
WHERE r.key_digest = ?0 AND NOT EXISTS (SELECT 1 FROM ins)`

// pgLeft is how long the row r has left at c.now, in whole microseconds:
// both are timestamptz with microsecond precision, so the interval's epoch
// is a whole number of microseconds (numeric from Postgres 14, a double
// before, exact to the microsecond either way for any retention).
const pgLeft = "(extract(epoch FROM r.expires_at - c.now) * 1000000)::bigint"

var pgStmts = stmts{
	claimOrRead: pgClaimOrRead,

	insert: `INSERT INTO {R} (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
SELECT ?0::bytea, ?1::text, ?2::text, ?3::bytea, 1, ?4::bytea,
	c.now + ?5::bigint * interval '1 microsecond', c.now, c.now + ?6::bigint * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS now, set_config('lock_timeout', ?7::text, true) AS bound) c
WHERE c.bound IS NOT NULL
ON CONFLICT (key_digest) DO NOTHING
RETURNING lease_until, expires_at`,

	// The claim of an atomic execution, in its transaction. Its row source
	// c first reads the transaction's lock_timeout (o, a subquery of its
	// own, so read before it changes), then sets it to ?7 (the Store's
	// wait), so that the insert waits that long at most for a concurrent
	// claim whose transaction is still open. Once the insert is done, the
	// statement puts the old value back when it claimed the key: the bound
	// is the claim's, and the function's statements wait for their locks
	// as they would without it, in the same round trip. When the key is
	// taken, the bound stays for the takeover that may follow, and the
	// layer puts the old value (the third column) back itself after one.
	// set_config is volatile: Postgres evaluates c once, before the insert,
	// and the CASE after it. One row always: lease_until is NULL when the
	// key was taken.
	atomicInsert: `WITH c AS (
	SELECT o.old, clock_timestamp() AS now, set_config('lock_timeout', ?7::text, true) AS bound
	FROM (SELECT current_setting('lock_timeout') AS old OFFSET 0) o
), ins AS (
	INSERT INTO {R} (key_digest, scope, client_key, fingerprint, state, token, lease_until, created_at, expires_at)
	SELECT ?0::bytea, ?1::text, ?2::text, ?3::bytea, 1, ?4::bytea,
		c.now + ?5::bigint * interval '1 microsecond', c.now, c.now + ?6::bigint * interval '1 microsecond'
	FROM c WHERE c.bound IS NOT NULL
	ON CONFLICT (key_digest) DO NOTHING
	RETURNING lease_until, expires_at
)
SELECT ins.lease_until, ins.expires_at,
	CASE WHEN ins.lease_until IS NULL THEN c.old ELSE set_config('lock_timeout', c.old, true) END
FROM c LEFT JOIN ins ON true`,

	// The record and the server's clock, from which readRow derives its
	// verdicts: a plain primary-key read, as cheap as a read can be.
	read: `SELECT fingerprint, state, token, result, lease_until, expires_at, clock_timestamp() FROM {R} WHERE key_digest = ?0`,

	// The first Reserve that finds a lease lapsed grants its owner a grace
	// (?2 microseconds) instead of taking over: a compare-and-set on the
	// token and the lapsed, not yet graced, state.
	grace: `UPDATE {R} AS r
SET state = 3, lease_until = c.now + ?2::bigint * interval '1 microsecond',
	expires_at = GREATEST(r.expires_at, c.now + ?2::bigint * interval '1 microsecond')
FROM (SELECT clock_timestamp() AS now) c
WHERE r.key_digest = ?0 AND r.token = ?1::bytea AND r.state = 1 AND r.fingerprint = ?3::bytea
	AND r.lease_until <= c.now AND r.expires_at > c.now
RETURNING r.lease_until, r.expires_at, ` + pgLeft,

	takeover: `UPDATE {R} AS r
SET scope = ?1::text, client_key = ?2::text, fingerprint = ?3::bytea, state = 1, token = ?4::bytea, result = NULL,
	lease_until = c.now + ?5::bigint * interval '1 microsecond', created_at = c.now,
	expires_at = c.now + ?6::bigint * interval '1 microsecond'
FROM (SELECT clock_timestamp() AS now) c
WHERE r.key_digest = ?0 AND r.token = ?7::bytea
	AND (r.expires_at <= c.now OR (r.state = 3 AND r.fingerprint = ?3 AND r.lease_until <= c.now))
RETURNING r.lease_until, r.expires_at`,

	complete: `UPDATE {R}
SET state = 2, result = ?2::bytea, lease_until = NULL, expires_at = clock_timestamp() + ?3::bigint * interval '1 microsecond'
WHERE key_digest = ?0 AND token = ?1::bytea AND state IN (1, 3) AND expires_at > clock_timestamp()`,

	owned: `SELECT state, result FROM {R} WHERE key_digest = ?0 AND token = ?1::bytea AND expires_at > clock_timestamp()`,

	release: `DELETE FROM {R} WHERE key_digest = ?0 AND token = ?1::bytea AND state IN (1, 3)`,

	live: `SELECT 1 FROM {R} WHERE key_digest = ?0 AND expires_at > clock_timestamp()`,

	// ?3 is the lease and its grace: the record outlives both.
	renew: `UPDATE {R} AS r
SET state = 1, lease_until = c.now + ?2::bigint * interval '1 microsecond',
	expires_at = GREATEST(r.expires_at, c.now + ?3::bigint * interval '1 microsecond')
FROM (SELECT clock_timestamp() AS now) c
WHERE r.key_digest = ?0 AND r.token = ?1::bytea AND r.state IN (1, 3) AND r.expires_at > c.now`,

	get: `SELECT r.fingerprint, r.state, r.result, r.lease_until, r.expires_at, ` + pgLeft + `
FROM {R} r, (SELECT clock_timestamp() AS now) c WHERE r.key_digest = ?0 AND r.expires_at > c.now`,

	markEvent: `INSERT INTO {E} (consumer, event_id, created_at, expires_at)
SELECT ?0::text, ?1::text, c.now, c.now + ?2::bigint * interval '1 microsecond' FROM (SELECT clock_timestamp() AS now) c
ON CONFLICT (consumer, event_id) DO NOTHING`,

	eventExpired: `SELECT expires_at <= clock_timestamp() FROM {E} WHERE consumer = ?0 AND event_id = ?1`,

	reviveEvent: `DELETE FROM {E} WHERE consumer = ?0 AND event_id = ?1 AND expires_at <= clock_timestamp()`,

	// One statement decides: a new key inserts (1 row), a newer version
	// updates (1 row), an equal or older one matches the WHERE of DO UPDATE
	// to false and changes nothing (0 rows).
	advance: `INSERT INTO {V} AS v (source, external_id, version, updated_at)
VALUES (?0::text, ?1::text, ?2::bigint, clock_timestamp())
ON CONFLICT (source, external_id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
WHERE v.version < excluded.version`,

	version: `SELECT version FROM {V} WHERE source = ?0 AND external_id = ?1`,

	// SKIP LOCKED leaves rows a transaction holds (a CompleteTx in flight)
	// for a later batch; FOR UPDATE re-checks the expiry of a row that
	// changed before it was locked. An in-progress record goes only once
	// its lease and grace ended too (see DeleteExpired).
	sweep: [2]string{
		`DELETE FROM {R} WHERE key_digest IN (
	SELECT key_digest FROM {R} WHERE expires_at <= now()
		AND (state = 2 OR lease_until + (lease_until - created_at) / 4 <= now())
	LIMIT ?0 FOR UPDATE SKIP LOCKED)`,
		`DELETE FROM {E} WHERE (consumer, event_id) IN (
	SELECT consumer, event_id FROM {E} WHERE expires_at <= now() LIMIT ?0 FOR UPDATE SKIP LOCKED)`,
	},
}
