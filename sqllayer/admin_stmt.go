package sqllayer

import (
	"strings"

	"github.com/uptrace/bun/dialect"
)

// The statements of Admin. They differ between dialects only in how the
// database's clock is read ({NOW}), how a duration in microseconds is taken
// off it ({AGO0}: the argument ?0), how a token argument is typed ({TOK1}:
// the argument ?1) and the audit table's DDL, so they are written once with
// those placeholders.

// adminSQL is one dialect's fragments.
type adminSQL struct {
	now, ago0, tok1 string
	audit           string // CREATE TABLE of the audit table {A}
	auditIndex      string // CREATE INDEX of it, "" when the table carries it
	size            string // the records table's size in bytes; ?0 the table, ?1 its schema or "" (SQLite: the file's, no argument)
}

var adminDialects = map[dialect.Name]adminSQL{
	dialect.PG: {
		now:  "clock_timestamp()",
		ago0: "clock_timestamp() - ?0::bigint * interval '1 microsecond'",
		tok1: "?1::bytea",
		audit: `CREATE TABLE IF NOT EXISTS {A} (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    action      text        NOT NULL,
    tier        text        NOT NULL,
    outcome     text        NOT NULL,
    key_digest  bytea       NOT NULL,
    scope       text        NOT NULL,
    client_key  text        NOT NULL,
    token       bytea       NOT NULL,
    reason      text        NOT NULL
)`,
		auditIndex: "CREATE INDEX IF NOT EXISTS {AI} ON {A} (key_digest)",
		size:       "SELECT pg_total_relation_size(CASE WHEN ?1::text = '' THEN quote_ident(?0::text) ELSE quote_ident(?1::text) || '.' || quote_ident(?0::text) END::regclass)",
	},
	dialect.MySQL: {
		now:  "UTC_TIMESTAMP(6)",
		ago0: "UTC_TIMESTAMP(6) - INTERVAL ?0 MICROSECOND",
		tok1: "?1",
		audit: `CREATE TABLE IF NOT EXISTS {A} (
    id          BIGINT          NOT NULL AUTO_INCREMENT,
    at          DATETIME(6)     NOT NULL,
    actor       VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    action      VARCHAR(16)     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    tier        VARCHAR(16)     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    outcome     VARCHAR(16)     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    key_digest  BINARY(32)      NOT NULL,
    scope       VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    client_key  VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token       VARBINARY(64)   NOT NULL,
    reason      TEXT            CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (id),
    KEY {AI} (key_digest)
) ENGINE = InnoDB`,
		size: "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables WHERE table_name = ?0 AND table_schema = IF(?1 = '', DATABASE(), ?1)",
	},
	dialect.SQLite: {
		now:  liteNow,
		ago0: "(" + liteNow + " - ?0)",
		tok1: "?1",
		audit: `CREATE TABLE IF NOT EXISTS {A} (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    tier        TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    key_digest  BLOB    NOT NULL,
    scope       TEXT    NOT NULL,
    client_key  TEXT    NOT NULL,
    token       BLOB    NOT NULL,
    reason      TEXT    NOT NULL
)`,
		auditIndex: "CREATE INDEX IF NOT EXISTS {AI} ON {A} (key_digest)",
		// SQLite keeps every table in one file: its size is the database's.
		size: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
	},
}

// entryColumns are the columns an operator's read returns, then the
// database's clock.
const entryColumns = "key_digest, scope, client_key, fingerprint, state, token, result, created_at, lease_until, expires_at, {NOW}"

// adminStmts are Admin's statements over one set of table names.
type adminStmts struct {
	inspect, stuck, forget, exists, note, trail, stats, size string
	ddl                                                      []string
}

func newAdminStmts(d dialect.Name, n names, audit string, native bool) adminStmts {
	f := adminDialects[d]
	s := adminStmts{
		inspect: "SELECT " + entryColumns + " FROM {R} WHERE key_digest = ?0",
		// ?0 the age in microseconds, ?1 the limit.
		stuck: "SELECT " + entryColumns + " FROM {R} WHERE state IN (1, 3) AND (lease_until <= {NOW} OR created_at <= {AGO0})" +
			" ORDER BY created_at, key_digest LIMIT ?1",
		forget: "DELETE FROM {R} WHERE key_digest = ?0 AND token = {TOK1} AND state = 2",
		exists: "SELECT 1 FROM {R} WHERE key_digest = ?0",
		note: `INSERT INTO {A} (at, actor, action, tier, outcome, key_digest, scope, client_key, token, reason)
VALUES ({NOW}, ?0, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`,
		// ?0 the key digest, ?1 the limit: newest first.
		trail: "SELECT at, actor, action, tier, outcome, key_digest, scope, client_key, token, reason FROM {A} WHERE key_digest = ?0 ORDER BY id DESC LIMIT ?1",
		stats: "SELECT state, CASE WHEN expires_at <= {NOW} THEN 1 ELSE 0 END, COUNT(*), MIN(expires_at), MIN(created_at), {NOW} FROM {R}" +
			" GROUP BY 1, 2",
		size: f.size,
		ddl:  []string{f.audit},
	}
	if f.auditIndex != "" {
		s.ddl = append(s.ddl, f.auditIndex)
	}
	r := strings.NewReplacer("{NOW}", f.now, "{AGO0}", f.ago0, "{TOK1}", f.tok1,
		"{AI}", indexName(audit, "_key_idx"), "{A}", audit, "{R}", n.records)
	for _, p := range []*string{&s.inspect, &s.stuck, &s.forget, &s.exists, &s.note, &s.trail, &s.stats, &s.size} {
		*p = r.Replace(*p)
		if native {
			*p = dollars(*p)
		}
	}
	for i := range s.ddl {
		s.ddl[i] = r.Replace(s.ddl[i])
	}
	return s
}
