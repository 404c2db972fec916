package sqllayer

import (
	"regexp"
	"strconv"
)

// MUST AGREE with the single Postgres statements (stmt_postgres.go):
// FuzzBatchAgreesWithSingle (batch_fuzz_test.go) and
// FuzzEventBatchAgreesWithSingle (batch_events_fuzz_test.go) compare them
// under make test; TestPostgresBatchPlansLookUpEachKey holds their plans
// to key lookups.

// Postgres batched statements (see batch_stmt.go). Each column of a batch
// is one array argument; unnest turns the arrays back into rows, in array
// order, so that the keys are locked in the order the caller sorted them.
// Reads of the batch's rows look each key up in a LATERAL subquery with
// OFFSET 0, which the planner must run once per key: an index lookup, for
// whatever size the table had when the plan was made.
//
// Each array reaches unnest through a scalar subquery, which hides its
// length from the planner: the plan of a batch of 2 then costs what the
// plan of any batch costs, so that after its first few runs the server
// keeps one generic plan instead of planning every run anew (a custom plan
// for a short array looks cheaper than the generic one, which assumes 10
// rows).

// pgClaimMany claims the free keys among ?0 and returns those it inserted.
// Arguments: keys, scopes, client keys, fingerprints, tokens, leases and
// expiries (microseconds), as claim.args for one key.
const pgClaimMany = `INSERT INTO {R} (` + recordCols + `)
SELECT v.k, v.s, v.c, v.f, 1, v.t, c.now + v.l * interval '1 microsecond', c.now, c.now + v.e * interval '1 microsecond'
FROM unnest((SELECT ?0::bytea[]), (SELECT ?1::text[]), (SELECT ?2::text[]), (SELECT ?3::bytea[]),
		(SELECT ?4::bytea[]), (SELECT ?5::bigint[]), (SELECT ?6::bigint[])) AS v(k, s, c, f, t, l, e),
	(SELECT clock_timestamp() AS now) c
ON CONFLICT (key_digest) DO NOTHING
RETURNING key_digest, lease_until, expires_at`

// pgReadMany reads the records of the keys ?0, as the read statement does
// one, with the key first.
const pgReadMany = `SELECT r.key_digest, r.fingerprint, r.state, r.token, r.result, r.lease_until, r.expires_at, c.now
FROM unnest((SELECT ?0::bytea[])) AS v(k), (SELECT clock_timestamp() AS now) c,
	LATERAL (SELECT * FROM {R} WHERE key_digest = v.k OFFSET 0) r`

// pgCompleteMany completes each key of ?0 whose live in-progress record
// its token in ?1 holds, with its result ?2 and retention ?3
// (microseconds), and returns the keys it completed. The rows are found by
// key and changed by ctid: under READ COMMITTED a row changed after the
// statement's snapshot has a new version with another ctid, which the
// UPDATE then skips.
const pgCompleteMany = `UPDATE {R} AS r
SET state = 2, result = w.res, lease_until = NULL, expires_at = w.now + w.ttl * interval '1 microsecond'
FROM (SELECT x.id, v.res, v.ttl, c.now
	FROM unnest((SELECT ?0::bytea[]), (SELECT ?1::bytea[]), (SELECT ?2::bytea[]), (SELECT ?3::bigint[])) AS v(k, t, res, ttl),
		(SELECT clock_timestamp() AS now) c,
		LATERAL (SELECT ctid AS id FROM {R}
			WHERE key_digest = v.k AND token = v.t AND state IN (1, 3) AND expires_at > c.now OFFSET 0) x) w
WHERE r.ctid = w.id
RETURNING r.key_digest`

// pgMarkMany inserts the event IDs ?2 of consumer ?0 with retention ?1
// where they are free, and returns each ID it did not insert, with
// whether the row that holds it expired, as the statement's snapshot sees
// it: NULL when the snapshot sees no row, because one committed after it
// (a live duplicate). It returns no row when it inserted them all.
const pgMarkMany = `WITH ins AS (
	INSERT INTO {E} (consumer, event_id, created_at, expires_at)
	SELECT ?0::text, v.id, c.now, c.now + ?1::bigint * interval '1 microsecond'
	FROM unnest((SELECT ?2::text[])) AS v(id), (SELECT clock_timestamp() AS now) c
	ON CONFLICT (consumer, event_id) DO NOTHING
	RETURNING event_id
)
SELECT v.id, e.expires_at <= clock_timestamp()
FROM unnest((SELECT ?2::text[])) AS v(id)
	LEFT JOIN LATERAL (SELECT expires_at FROM {E} WHERE consumer = ?0 AND event_id = v.id OFFSET 0) e ON true
WHERE (SELECT count(*) FROM ins) < cardinality(?2::text[])
	AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.event_id = v.id)`

// pgReviveMany deletes the expired rows of consumer ?0 among the event IDs
// ?1.
const pgReviveMany = `DELETE FROM {E} AS e
USING (SELECT x.id FROM unnest((SELECT ?1::text[])) AS v(id),
	LATERAL (SELECT ctid AS id FROM {E}
		WHERE consumer = ?0::text AND event_id = v.id AND expires_at <= clock_timestamp() OFFSET 0) x) w
WHERE e.ctid = w.id`

// pgClaimAndComplete is pgClaimMany and pgCompleteMany in one statement,
// the completions' arguments after the claims': it returns true with each
// key it claimed, with its lease and expiry, and false with each key it
// completed. The two parts touch different rows: a completion's row was
// claimed, and committed, before its owner could complete it.
func pgClaimAndComplete() string {
	return "WITH ins AS (\n" + pgClaimMany + "\n), upd AS (\n" + shift(pgCompleteMany, 7) + "\n)\n" +
		"SELECT true, key_digest, lease_until, expires_at FROM ins\n" +
		"UNION ALL\nSELECT false, key_digest, NULL, NULL FROM upd"
}

var placeholder = regexp.MustCompile(`\?(\d+)`)

// shift renumbers the placeholders ?N of q as ?N+by.
func shift(q string, by int) string {
	return placeholder.ReplaceAllStringFunc(q, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "?" + strconv.Itoa(n+by)
	})
}
