package behaviour

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memlayer"
)

// Backend is one pair of shared tiers the rows run on. Every instance a row
// starts opens its own layers over the same backing state, as separate
// services sharing one Redis and one database would.
type Backend struct {
	Name string
	// Open returns the Redis-tier and SQL-tier layers of one instance.
	Open func(t testing.TB) (redis, sql idem.Layer)
}

// Backends returns the backends to run on: the memory layers always, then
// the embedded pair and the real servers once their layers exist.
func Backends(t testing.TB) []Backend {
	return []Backend{Memory(t)}
}

// Memory is a pair of memlayers shared by every instance.
func Memory(testing.TB) Backend {
	redis, sql := memlayer.New(), memlayer.New()
	return Backend{
		Name: "memory",
		Open: func(testing.TB) (idem.Layer, idem.Layer) { return redis, sql },
	}
}
