// Command idem is the operator's tool for the records idem stores: look up
// a key in every tier, list the claims that look stuck, release one with a
// record of who did it and why, count what the table holds, and ask the
// tiers whether they are ready.
//
//	idem get     --scope S KEY | --digest HEX
//	idem list    --in-progress [--older-than D] [--limit N] [--tier sql|redis|all]
//	idem release --scope S KEY | --digest HEX --reason "…" [--by NAME] [--forget --yes]
//	idem stats
//	idem check
//
// # Configuration
//
// As the tests and the demonstration are configured: flags, each with an
// environment variable as its default. At most one database:
//
//	--postgres DSN       IDEM_POSTGRES_DSN    postgres://user@host:5432/db?sslmode=disable (pgx)
//	--mysql DSN          IDEM_MYSQL_DSN       user:pass@tcp(host:3306)/db (go-sql-driver/mysql, MariaDB or MySQL)
//	--sqlite DSN         IDEM_SQLITE_DSN      file:/var/lib/app/idem.db?_pragma=busy_timeout(5000) (modernc.org/sqlite)
//	--redis URL          IDEM_REDIS_URL       redis://host:6379/0
//	--records-table T    IDEM_RECORDS_TABLE   default idempotency_records
//	--events-table T     IDEM_EVENTS_TABLE    default processed_events
//	--versions-table T   IDEM_VERSIONS_TABLE  default sync_versions
//	--audit-table T      IDEM_AUDIT_TABLE     default idem_audit
//	--redis-prefix P     IDEM_REDIS_PREFIX    default idem:
//	--timeout D          IDEM_TIMEOUT         default 10s, the bound on the whole command
//	--json                                    one JSON document on stdout, for scripts
//
// Give the table names and the prefix the service uses (its
// sqllayer.With…Table and redislayer.WithPrefix options). A key is named
// as the service builds it: the scope (the middleware's WithScope, "" for
// none) and the client key (the Idempotency-Key header's value, a
// message's ID), or by the 64-character digest that logs and the tables
// show.
//
// # Releasing
//
// release reads the key's record in every tier and frees an in-progress
// claim with a compare-and-set on the owner token it read: a claim that
// completed or was taken over in between is left as it is, the owner's
// result wins, and release says it freed nothing. SQL is released first;
// when its claim changed, Redis is left alone. A completed record is
// refused unless --forget, which needs --yes, or the client key (or digest)
// typed again on the terminal. Every attempt writes an audit line to the
// standard error (who: --by, or the OS user; when; the key; the token; the
// reason; the outcome) and a row to the audit table, which release creates
// if it is missing; with Redis alone there is no table, only the line.
//
// # Exit status
//
//	0  done: found, listed, freed, ready
//	1  an error: a tier unreachable, a table missing, not ready (check)
//	2  usage: an unknown command or flag, a missing argument
//	3  not found: no tier holds the key
//	4  release freed nothing: the record changed since it was read, or vanished
//	5  refused: a completed record without --forget, or --forget unconfirmed
//
// The library offers the same operations (sqllayer.Layer.Admin,
// redislayer.Layer.Admin) for a service to mount behind its own admin
// authentication; idem exposes no HTTP endpoint.
package main
