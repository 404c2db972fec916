package behaviour

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware/idemtest"
)

// Backend is one pair of shared tiers the rows run on. Every instance a row
// starts opens its own layers over the same backing state, as separate
// services sharing one Redis and one database would.
type Backend struct {
	Name string
	// Open returns the Redis-tier and SQL-tier layers of one instance.
	Open idemtest.Tiers
	// Atomic is set when the SQL tier runs executions in a transaction
	// (tiered.AtomicLayer): the rows run in the atomic mode too.
	Atomic bool
}

// Backends returns the backends to run on: the memory layers, the embedded
// pair (miniredis and a SQLite file), and the real Redis and Postgres when
// either is reachable (required under IDEM_REQUIRE_SERVICES=1). When both
// are absent the real stack would be the embedded pair again, so it is left
// out.
func Backends(t testing.TB) []Backend {
	t.Helper()
	backends := []Backend{Memory(t), Stack(stacktest.Embedded(t))}
	if real := stacktest.Real(t); real.Redis.Real() || real.SQL.Real {
		backends = append(backends, Stack(real))
	}
	return backends
}

// Memory is a pair of memlayers shared by every instance.
func Memory(t testing.TB) Backend {
	redis, sql := must.Get(memlayer.New())(t), must.Get(memlayer.New())(t)
	return Backend{
		Name: "memory",
		Open: func(testing.TB) (idem.Layer, idem.Layer) { return redis, sql },
	}
}

// Stack is a Redis and a database shared by every instance, each instance
// with a client and a pool of its own. Its name says which servers they are.
func Stack(st *stacktest.Stack) Backend {
	return Backend{
		Name:   st.Redis.Kind() + "+" + st.SQL.Kind,
		Open:   func(t testing.TB) (idem.Layer, idem.Layer) { return st.RedisLayer(t), st.SQLLayer(t) },
		Atomic: true,
	}
}
