// Package behaviour runs the conformance kit of package middleware/idemtest
// on every backend of the repository's tests (memory layers, miniredis with
// SQLite, real Redis with Postgres) for each framework adapter's tests
// (net/http and chi, Gin, Echo), and gives those tests a memory Store and a
// small client.
package behaviour
