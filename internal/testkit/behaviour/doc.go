// Package behaviour is the one behaviour table of package middleware, run
// against every framework adapter (net/http and chi, Gin, Echo) and every
// backend (memory layers, miniredis with SQLite, real Redis with Postgres).
// An adapter's tests call Run with a Mount that puts the middleware in front
// of a handler in that framework, RunCuts with the same kind of Mount (one
// per recovery setup), and RunChain with a Chain that adds a middleware of
// the framework after it.
package behaviour
