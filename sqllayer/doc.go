// Package sqllayer is the SQL tier of idem: the final yes/no decision. A
// record is a row under a unique key, written before any side effect and
// changed only by the holder of its owner token. It runs on uptrace/bun with
// Postgres (pgdialect, through pgx or another driver), SQLite (sqlitedialect
// with modernc.org/sqlite, the embedded default) and MySQL 8 / MariaDB 10.5+
// (mysqldialect with go-sql-driver/mysql); New picks the SQL by
// db.Dialect().Name().
//
// # Tables
//
// Init creates three tables (names configurable, see the With…Table
// options) and their indexes if they are missing; DDL and Layer.Schema give
// the same statements to users who run their own migrations (files
// ddl/postgres.sql, ddl/mysql.sql and ddl/sqlite.sql).
//
//   - idempotency_records: key_digest (the 32-byte SHA-256 digest of
//     idem.Key, binary, primary key), scope and client_key (labels for
//     operators, UTF-8, cut to 255 bytes), fingerprint (bytes), state (1 in
//     progress, 2 completed), token (the owner token, bytes), result (bytes;
//     bytea, LONGBLOB or BLOB), lease_until (NULL once completed),
//     created_at (when the current claim was made) and expires_at, indexed
//     for the janitor.
//   - processed_events: (consumer, event_id) primary key, created_at,
//     expires_at (indexed).
//   - sync_versions: (source, external_id) primary key, version, updated_at.
//
// Layer.Admin is the operator's view (the idem command's): it reads a
// record with its token, lists stuck claims, frees one by compare-and-set
// and records each release and forget in a fourth table, idem_audit
// (WithAuditTable), which Admin.Init creates and Admin.Schema lists.
//
// # The clock rule
//
// Every lease and expiry is decided in SQL by the database's clock, never the
// application's: Postgres compares timestamptz columns with clock_timestamp()
// (the janitor with now(), the start of its one-statement transaction);
// MySQL stores DATETIME(6) in UTC and compares with UTC_TIMESTAMP(6), and
// reads those columns as UTC wall-clock times whatever the DSN says
// (parseTime or not, any loc); SQLite
// stores INTEGER microseconds since the Unix epoch and compares with its own
// unixepoch('subsec') (millisecond resolution). Durations travel as
// microseconds. Instances whose clocks disagree therefore agree on every
// lease: the layer reads no application clock, but to time what the
// Observer hears. An expired row is absent: Reserve, Get and every owner operation
// treat it so before the janitor deletes it.
//
// Every statement that reads a record returns beside it how long it has
// left, in microseconds from the same "now" as its verdicts on expiry and
// lease, and the record's ExpiresIn is that, less the clock's resolution (a
// microsecond; a millisecond on SQLite), so that it never promises more
// than the record has whatever the application's clock says. A claim's is
// the expiry it was written with, less the resolution.
//
// # Statements
//
// Reserve has two ways to learn whether a key is free, and the cheaper one
// depends on the workload, so by default ([idem.OrderAdaptive]) it follows what it has
// seen lately:
//
//   - Read first, while most keys it sees already exist: a duplicate costs
//     one primary-key SELECT, which returns the record with the database's
//     verdict on its expiry and lease, and neither writes nor locks. A
//     missing key then costs the INSERT too.
//   - Insert first, while most keys are new: a new key costs one INSERT. A
//     duplicate costs that INSERT, which does nothing, and the read.
//
// The INSERT decides the winner among concurrent claims: INSERT …
// ON CONFLICT (key_digest) DO NOTHING RETURNING on Postgres and SQLite; on
// MySQL a plain INSERT whose error 1062, and only that error, means the key
// is taken (INSERT IGNORE would also turn truncation and bad values into
// warnings). A claim that lost reads the winner's row in a new statement,
// which sees it even when the INSERT had to wait for the winner's commit.
// SQLite always reads first, so that duplicates stay off its single write
// lock. WithReserveOrder fixes the order.
//
// The [OrderOneRoundTrip] order (Postgres) makes every Reserve a single statement:
// the INSERT sits in a WITH clause and a second branch returns the existing
// row when the INSERT did nothing, one round trip for new keys and
// duplicates alike, for a distant database. When that INSERT had to wait for
// a concurrent claim that committed, the statement's snapshot, taken before
// the wait, cannot see the winner's row and the statement returns nothing;
// the layer then reads in a new statement. A data-modifying statement costs
// the server markedly more than a SELECT or a plain INSERT, which is why it
// is not the default: on a 2-core machine it cost a duplicate about twice
// a SELECT in the server's processor time.
//
// A record found in progress (state 1) for the same fingerprint with a
// lapsed lease is not taken over at once: an UPDATE that is a
// compare-and-set on its token and its lapsed state 1, re-checking the
// clock in its WHERE clause, grants the owner a grace of a quarter of the
// lease the Reserve passes (lease_until moves to the grace's end, expires_at
// to it if it was earlier, state becomes 3), keeps the token, and Reserve
// answers in progress. Of concurrent Reserves exactly one changes the row;
// the others read it again and find the grace running. A record found
// expired, or in its grace (state 3) with the grace lapsed too, is taken
// over by an UPDATE that is a compare-and-set on the old token and
// re-checks the clock in the same way; it mints a new token, so the old
// owner's stops working. Both writes happen only on a lapsed lease, never
// for a duplicate of a live one. A record with another fingerprint is never
// taken over and gets no grace. A round that loses a race (the row changed
// between statements) starts over, a bounded number of times. Readers see
// state 3 as in progress; Complete, Renew and Release accept it, and Renew
// sets it back to 1, so the next lapse gets a grace again. The state column
// held 1 and 2 before; 3 needs no change to the tables.
//
// An in-progress record is kept for the retention Reserve passes, or until
// its lease and the grace after it end if that is later, and Renew moves
// its expiry to the end of the new lease's grace when that is later: work
// that outlives the retention keeps its grace, and the record is still
// there for the first Reserve after the lease to grant it.
//
// Complete, Renew and Release are one UPDATE or DELETE each, guarded by the
// token, the in-progress state and the expiry. When it changes no row, one
// read tells a completion re-sent by its owner (nil) or a release of a
// missing row (nil) from a lost lease (idem.ErrLeaseLost). Get is one
// primary-key SELECT of the live row. Records returned to anyone but the
// claimer carry no token.
//
// # Batching
//
// With WithBatchSize, Reserve and Complete calls that arrive while a
// statement of their kind is in flight on the Layer go out together in the
// next one (group commit): a call that finds nothing in flight is sent at
// once, alone, and no timer holds a call back. On Postgres claims and
// completions batch together, in one statement and one commit. Each
// caller's answer is the one it would have had alone (see WithBatchSize).
// Flusher goroutines run the queued batches and end when the queue is
// empty. MarkProcessedBatch is the explicit batch API of consumers that
// receive events in batches.
//
// # Transactions of the caller
//
// InTx inserts the processed-event row and runs the caller's function in one
// transaction: a redelivered message is a duplicate, and a failed function
// rolls back both, so the redelivery runs again. MarkProcessed is the same
// insert inside a transaction the caller already holds, CompleteTx commits an
// HTTP completion together with the handler's writes, and AdvanceVersion is
// the version gate of sync jobs (one upsert whose row count says whether the
// version is newer). RunInTx runs a function in a transaction and runs it
// again on deadlocks and serialization failures.
//
// # Errors and retries
//
// Driver errors are classified by code, never by message, and without
// importing any driver, so that a program links only the driver of its
// database: Postgres SQLSTATE through the SQLState method of pgx's and
// lib/pq's errors; MySQL error numbers read from the exported Number field
// of go-sql-driver/mysql's *MySQLError, which the layer recognises by its
// exact fields; SQLite result codes through the Code method of
// modernc.org/sqlite's errors; and the standard library's vocabulary
// (context errors, net.Error, driver.ErrBadConn, io.ErrUnexpectedEOF, pgx's
// Timeout and SafeToRetry methods). Two exceptions match text, each
// confined to one driver's one case: SQLite reports a missing table or
// column only as SQLITE_ERROR with "no such table" or "no such column" in
// its message; and go-sql-driver/mysql's ErrInvalidConn (a connection that
// broke under a statement, as when the server kills it) and ErrPktTooLarge
// are errors.New values, recognised on a MySQL layer by their type and
// exact wording.
//
// A lost connection, a refused or timed-out dial, a server shutting down
// (57P01) or a deadline passed while waiting for the server give
// idem.ErrUnavailable; a deadlock or serialization failure (40001, 40P01,
// MySQL 1213, SQLite BUSY) gives ErrConflict; a packet or value over the
// server's limit gives idem.ErrTooLarge. A mistake in the setup gives
// idem.ErrConfig, with advice on what to change: a table that does not
// exist (Postgres 42P01, MySQL 1146, SQLite "no such table": run Init or
// apply DDL), a column that does not exist (42703, 1054: a table from
// another version), an unknown database (3D000, 1049), refused credentials
// (28P01, 28000, 1045), a missing privilege (42501, 1044, 1142) or a server
// certificate that fails TLS verification. The driver's error stays wrapped
// for errors.As and logs. The layer's own statements are each a whole
// transaction and safe to send again, so conflicts and broken connections
// are retried (WithRetries) before a call fails; a setup mistake is never
// retried, and statements inside a caller's transaction never are.
//
// Check asks in one round trip whether the tables and their columns are
// there, for readiness probes: nil, idem.ErrConfig or idem.ErrUnavailable.
//
// # Drivers
//
// On Postgres and SQLite the layer sends its statements to the driver
// beneath bun with the driver's own $N arguments: pgx then prepares each
// statement once per connection and runs it in one round trip with binary
// arguments, where bun's formatting would inline arguments into a new text
// that pgx's default mode prepares anew every time. bun's query hooks
// therefore do not see these statements; use the Observer (the Store's,
// or one put on a call's context with idem.ContextWithObserver). Batched
// statements on Postgres carry each column as one array argument: pgx's
// driver binds Go slices as arrays, other drivers get the arrays' text
// form (found by the driver's package, without importing it). On MySQL bun
// formats the arguments into the text (bytes as hexadecimal literals), which
// the server runs in one round trip; go-sql-driver/mysql would otherwise
// prepare, execute and close each statement unless the DSN sets
// interpolateParams.
//
// # MySQL and MariaDB
//
// Keys, tokens, fingerprints and IDs are binary strings, so comparisons are
// byte for byte whatever the server's default collation (a case-insensitive
// collation would otherwise match tokens that differ in case). A claim
// learns the server's clock from the claim itself: the INSERT writes
// lease_until as the epoch plus LAST_INSERT_ID(now in microseconds) plus the
// lease, and the server returns that number as the insert ID. AdvanceVersion
// reads the affected-row count of INSERT … ON DUPLICATE KEY UPDATE (1
// inserted, 2 updated, 0 unchanged) and needs the driver's default
// clientFoundRows=false. Results travel as hexadecimal literals: the
// server's max_allowed_packet must exceed twice the largest result (the
// default 16 MiB of MariaDB fits idem.MaxResult). Concurrent first
// deliveries of one sync record can deadlock in InnoDB: run AdvanceVersion
// inside RunInTx, which runs the transaction again. Set timeouts in the DSN
// (timeout, readTimeout and writeTimeout of go-sql-driver/mysql): bun's MySQL
// dialect asks the server its version without a context when the DB is
// opened, and a server that accepts connections but never answers would
// hold that call for ever.
//
// # SQLite
//
// SQLite has one writer at a time. Use a file database in WAL mode with a
// busy timeout (modernc.org/sqlite: "file:idem.db?_pragma=busy_timeout(5000)
// &_pragma=journal_mode(WAL)"), so that writers wait for each other instead of
// failing with SQLITE_BUSY; Reserve's read-first path keeps duplicates off
// the write lock. An in-memory database belongs to its connection: give its
// pool exactly one connection. Table names cannot be schema-qualified.
//
// # Janitor
//
// DeleteExpired deletes expired records and processed events in short
// batches. Package janitor calls it on a schedule, one instance of N at a
// time, and a Store runs it for its lifetime with tiered.WithJanitor.
package sqllayer
