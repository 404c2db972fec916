// Package history records what calls of a Store did under faults and checks
// the record for broken promises.
package history
