package redislayer_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// TestAdaptiveOrderFollowsTheWorkload counts the commands a default layer
// sends: a run of new keys is claimed with SET alone; a run of duplicates
// turns it to a GET alone within a few dozen calls; new keys turn it back.
func TestAdaptiveOrderFollowsTheWorkload(t *testing.T) {
	m := testenv.MiniRedis(t).Mini
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	n := newCounter()
	c.AddHook(n)
	l := newLayer(t, c)
	scope := testenv.Name("order")
	reserve := func(id string) bool {
		t.Helper()
		_, claimed, err := l.Reserve(t.Context(), idem.NewKey(scope, id), "fp", time.Minute, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return claimed
	}
	counts := func() (gets, sets int) {
		n.mu <- struct{}{}
		defer func() { <-n.mu }()
		return n.cmds["get"], n.cmds["set"]
	}
	since := func(g0, s0 int) (int, int) { g, s := counts(); return g - g0, s - s0 }

	for i := range 50 {
		if !reserve("new" + strconv.Itoa(i)) {
			t.Fatalf("new key %d not claimed", i)
		}
	}
	if g, s := counts(); g != 0 || s != 50 {
		t.Fatalf("50 new keys: %d GET and %d SET, want 0 and 50", g, s)
	}
	if !reserve("dup") {
		t.Fatal("the duplicated key was not claimed first")
	}
	g0, s0 := counts()
	for range 100 {
		if reserve("dup") {
			t.Fatal("a duplicate was claimed")
		}
	}
	g, s := since(g0, s0)
	if s > 40 || g < 60 {
		t.Fatalf("100 duplicates: %d GET and %d SET, want the SETs to stop within a few dozen", g, s)
	}
	g0, s0 = counts()
	for range 10 {
		reserve("dup")
	}
	if g, s := since(g0, s0); g != 10 || s != 0 {
		t.Fatalf("10 more duplicates: %d GET and %d SET, want a GET each", g, s)
	}
	for i := range 100 {
		reserve("again" + strconv.Itoa(i))
	}
	g0, s0 = counts()
	for i := range 10 {
		reserve("last" + strconv.Itoa(i))
	}
	if g, s := since(g0, s0); g != 0 || s != 10 {
		t.Fatalf("new keys after a run of new keys: %d GET and %d SET, want a SET each", g, s)
	}
}
