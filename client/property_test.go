package client_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem/client"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// N operations, each attempt but the last under a random cut (the answer
// lost after the commit, or the connection refused before the request
// reached a server) on three instances: exactly N executions, and N
// answers, each the one its record holds.
func TestRandomCutsRunEachOnce(t *testing.T) {
	const n, attempts = 40, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	c := newCluster(t, realStack(t))
	faults := 0
	hc := c.client(t, func(a client.Attempt) {
		c.clean()
		if a.Number == attempts {
			return // the last attempt goes through
		}
		switch rng.IntN(3) {
		case 0:
			faults++
			c.each(func(p *faultproxy.Proxy) { p.DropReplies(true) })
		case 1:
			faults++
			c.each(func(p *faultproxy.Proxy) { p.RefuseNew(true) })
		}
	}, client.WithAttempts(attempts))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = testenv.Name("prop")
		got := charge(t.Context(), hc, keys[i], `{"amount":`+strconv.Itoa(i)+`}`)
		c.wantOnce(t, keys[i], got)
	}
	c.clean()
	if runs, answers := c.runs.Totals(); runs != n || answers != n {
		t.Fatalf("%d executions and %d answers for %d operations", runs, answers, n)
	}
	t.Logf("%d operations, %d attempts cut", n, faults)
}
