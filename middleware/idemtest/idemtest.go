package idemtest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Mount puts the idempotency middleware, built over store with exactly
// opts, in front of h in the stack under test, and returns the server's
// handler or the error of the middleware's constructor. Each row sets the
// options it checks, a scope always among them (middleware.WithSingleTenant
// unless the row checks scopes; one row mounts without a scope and expects
// the constructor's refusal); options of the service's own (a required
// key, a scope of its own after opts) change the answers the rows expect. The handler must route every
// method and every path to h, and h must see the request and the writer
// that the framework hands to its own handlers (gin.WrapH,
// echo.WrapHandler). Whatever else the stack puts around the middleware —
// recovery, logging — belongs in it too; a middleware that refuses the
// kit's requests (an authentication check) does not.
type Mount func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error)

// Chain is a Mount with one more middleware after the idempotency
// middleware, native to the framework: it calls later, and hands the
// request on only when later returns true (in Gin: c.Next, else c.Abort;
// in Echo: next(c), else return nil).
type Chain func(store *tiered.Store, opts []middleware.Option, later func(http.ResponseWriter, *http.Request) bool, h http.Handler) (http.Handler, error)

// Tiers opens the tiers of one instance of the service: the layers given to
// tiered.WithRedis and tiered.WithSQL, either of them nil for none, not
// both. Each call is one more instance over the same shared state, as
// service instances sharing one Redis and one database are: clients and
// pools of its own, the same records. It registers the cleanup of what it
// opens with t.Cleanup; the kit calls it many times, with the t of the row
// that starts the instance.
type Tiers func(t testing.TB) (redis, sql idem.Layer)

// Stack is the stack under test.
type Stack struct {
	// Mount mounts the middleware in front of the kit's handler. Required.
	Mount Mount

	// Chain mounts the middleware with a later middleware of the framework
	// after it, for the chain rows. Nil runs the chain rows with Mount and
	// the later middleware as a plain net/http wrapper of the handler, which
	// checks the chain up to the route's handler but not the framework's own
	// way of handing on.
	Chain Chain

	// Tiers opens the tiers of each instance a row starts. Required: pass
	// Memory(t) for in-process layers, or layers over your Redis and your
	// database. The kit wraps them to inject faults; a Redis-tier layer
	// keeps its completion signal (idem.Waiter and idem.Filler, when it has
	// both). The rows about a dead Redis tier run only when both tiers are
	// there.
	Tiers Tiers

	// StoreOptions are added to every Store the kit builds, after the tiers
	// and the kit's timeouts (2 s per Redis call, 10 s per SQL call: shared
	// test servers are slow, not dead) and before the options a row sets (a
	// short Wait, a short lease): your local cache, observer or Redis
	// fallback. Options that change what the middleware answers
	// (tiered.WithFailOpen) make rows fail. None by default.
	StoreOptions []tiered.Option

	// Atomic runs every Store the kit builds in the atomic mode
	// (tiered.WithAtomic): Tiers must return a SQL tier that runs
	// executions in a transaction (tiered.AtomicLayer, as *sqllayer.Layer),
	// and each row expects its ending's outcome in that mode (the Atomic
	// column of Endings). An atomic execution holds a connection, and on
	// SQLite the database's one write lock, for the handler's whole length:
	// the rows run one after another. Default off.
	Atomic bool
}

// Memory returns Tiers over two in-process memlayers, one as the Redis tier
// and one as the SQL tier, shared by every instance: the Store's full
// behaviour with no service to run.
func Memory(t testing.TB) Tiers {
	t.Helper()
	redis, err := memlayer.New()
	if err != nil {
		t.Fatalf("idemtest: %v", err)
	}
	sql, err := memlayer.New()
	if err != nil {
		t.Fatalf("idemtest: %v", err)
	}
	return func(testing.TB) (idem.Layer, idem.Layer) { return redis, sql }
}

// BurstRounds is how many bursts Run sends: rounds of 20 identical
// concurrent requests spread over three instances.
const BurstRounds = 3

// Run runs the kit against s: the behaviour table, BurstRounds bursts, the
// chain rows and the cut rows. Rows run in parallel; each starts its own
// instances and uses keys of its own.
func Run(t *testing.T, s Stack) {
	t.Helper()
	k := newKit(t, s)
	for _, r := range rows {
		if r.bothTiers && !k.bothTiers {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			k.parallel(t)
			r.fn(t, k.env())
		})
	}
	t.Run("burst", func(t *testing.T) {
		k.parallel(t)
		k.burst(t, BurstRounds)
	})
	t.Run("chain", func(t *testing.T) {
		k.parallel(t)
		k.chain(t)
	})
	t.Run("cuts", func(t *testing.T) {
		k.parallel(t)
		k.cuts(t)
	})
}

// parallel runs t's row beside the others, except in the atomic mode.
func (k *kit) parallel(t *testing.T) {
	if !k.Atomic {
		t.Parallel()
	}
}

// RunBurst sends rounds of 20 identical concurrent POSTs spread over three
// instances of s, each with its own Store over the shared tiers: in every
// round the handler must run once and all 20 answers must carry the same
// status, body and allowed headers. Run sends BurstRounds of them; RunBurst
// is the longer run, against real services.
func RunBurst(t *testing.T, s Stack, rounds int) {
	t.Helper()
	if rounds < 1 {
		t.Fatalf("idemtest: RunBurst with %d rounds, want at least 1", rounds)
	}
	newKit(t, s).burst(t, rounds)
}

// kit is a validated Stack.
type kit struct {
	Stack
	bothTiers bool // Tiers returns a Redis tier and a SQL tier
}

func newKit(t *testing.T, s Stack) *kit {
	t.Helper()
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	redis, sql := s.Tiers(t)
	if redis == nil && sql == nil {
		t.Fatal("idemtest: Stack.Tiers returned no tier: return a Redis-tier layer, a SQL-tier layer or both")
	}
	if err := s.checkAtomic(sql); err != nil {
		t.Fatal(err)
	}
	return &kit{Stack: s, bothTiers: redis != nil && sql != nil}
}

func (s Stack) check() error {
	switch {
	case s.Mount == nil:
		return errors.New("idemtest: Stack.Mount is required")
	case s.Tiers == nil:
		return errors.New("idemtest: Stack.Tiers is required (Memory(t) gives in-process layers)")
	}
	return nil
}

// checkAtomic checks that an atomic Stack's SQL tier runs executions in a
// transaction.
func (s Stack) checkAtomic(sql idem.Layer) error {
	if !s.Atomic {
		return nil
	}
	if _, ok := sql.(tiered.AtomicLayer); !ok {
		return fmt.Errorf("idemtest: Stack.Atomic needs Stack.Tiers to return a SQL tier that implements tiered.AtomicLayer (as *sqllayer.Layer); got %T", sql)
	}
	return nil
}
