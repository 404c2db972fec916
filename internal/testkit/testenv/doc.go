// Package testenv finds the services idem's tests run against.
//
// Each service is looked up in this order: an environment variable
// (IDEM_REDIS_URL, IDEM_POSTGRES_DSN, IDEM_MYSQL_DSN), then a brief probe of
// the standard local port, then an embedded fallback where one exists
// (miniredis for Redis, SQLite for SQL). With IDEM_REQUIRE_SERVICES=1 a
// missing real service fails the test instead of falling back or skipping, so
// that CI cannot pass on the embedded path by accident.
//
// Every helper registers its cleanup with t.Cleanup and closes what it
// opened, so goleak stays quiet. Names and prefixes from [Name] and
// [Prefix] are unique per call, so packages can run in parallel against one
// server without touching each other's keys or tables.
package testenv
