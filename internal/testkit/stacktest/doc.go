// Package stacktest assembles whole idem stacks for tests: one shared Redis
// and one shared database with tables of the test's own, and as many Stores
// over them as the test wants — each with its own Redis client and database
// pool, as separate service instances would have.
//
// Each returns two stacks: "real" (the real Redis and Postgres when this
// machine has them, required under IDEM_REQUIRE_SERVICES=1, else the
// embedded ones) and "embedded" (miniredis and a SQLite file).
package stacktest
