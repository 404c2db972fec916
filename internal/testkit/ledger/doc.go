// Package ledger counts a test service's executions per key and keeps the
// answer of each key's first execution, so that a test can check that
// every operation ran once and was answered with what its record holds.
package ledger
