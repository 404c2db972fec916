package testenv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestRedisCluster(t *testing.T) {
	rc := testenv.StartRedisCluster(t)
	c := rc.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Keys spread over every master; a hash tag keeps two keys together.
	masters := map[string]bool{}
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if err := c.Set(ctx, k, "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3", len(masters))
	}
	if err := c.MSet(ctx, "{t}a", "1", "{t}b", "2").Err(); err != nil {
		t.Fatalf("MSET of one hash tag: %v", err)
	}
}

func TestRedisClusterReplicated(t *testing.T) {
	rc := testenv.StartRedisClusterReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	masters, replicas, err := rc.Roles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("%d masters and %d replicas, want 3 and 3", len(masters), len(replicas))
	}
	c := rc.Client(t)
	if err := c.Set(ctx, "{a}k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	// A forced failover moves the key's master; the client follows it.
	owner, err := c.MasterForKey(ctx, "{a}k")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(masters, func(m *testenv.RedisServer) bool { return m.Addr() == owner.Options().Addr })
	if i < 0 {
		t.Fatalf("the key's master %s is not among the masters", owner.Options().Addr)
	}
	rc.Failover(t, replicas[i])
	if got, err := c.Get(ctx, "{a}k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after the failover: %q, %v", got, err)
	}
	// A killed master is replaced by its replica and rejoins as a replica.
	masters, _, err = rc.Roles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.KillMaster(t, masters[0])
	after, _, err := rc.Roles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 3 || slices.Contains(after, masters[0]) {
		t.Fatalf("masters after the kill: %d, the killed one among them %v", len(after), slices.Contains(after, masters[0]))
	}
	if err := c.Set(ctx, "{b}k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET after the kill: %v", err)
	}
}
