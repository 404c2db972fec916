package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

// servedBy checks, over c, that k holds v and that the server answering is
// s: a failover client must land on the master Sentinel names.
func servedBy(t *testing.T, c *redis.Client, s *testenv.RedisServer, k, v string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := c.Get(ctx, k).Result(); err != nil || got != v {
		t.Fatalf("GET %s = %q, %v; want %q", k, got, err, v)
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	port := s.Addr()[strings.LastIndexByte(s.Addr(), ':')+1:]
	if !strings.Contains(info, "\ntcp_port:"+port+"\r\n") {
		t.Fatalf("client is not on %s", s.Addr())
	}
}

func TestRedisSentinelFailover(t *testing.T) {
	t.Parallel() // each test has servers of its own; most of the time is waiting
	rs := testenv.StartRedisSentinel(t)
	first := rs.Master(t)
	if first != rs.Servers()[0] {
		t.Fatalf("sentinel reports %s as master, want %s", first.Addr(), rs.Servers()[0].Addr())
	}
	c := rs.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	servedBy(t, c, first, "k", "v")
	rs.WaitReplicated(t)

	start := time.Now()
	next := rs.Failover(t)
	t.Logf("failover from %s to %s took %v", first.Addr(), next.Addr(), time.Since(start))
	if next == first || rs.Master(t) != next {
		t.Fatalf("Failover returned %s; sentinel reports %s", next.Addr(), rs.Master(t).Addr())
	}
	// A new client asks Sentinel and goes to the new master, which has the
	// replicated key and takes writes.
	c2 := rs.Client(t)
	servedBy(t, c2, next, "k", "v")
	if err := c2.Set(ctx, "k2", "v2", time.Minute).Err(); err != nil {
		t.Fatalf("SET on the new master: %v", err)
	}
}

func TestRedisSentinelKillMaster(t *testing.T) {
	t.Parallel() // each test has servers of its own; most of the time is waiting
	rs := testenv.StartRedisSentinel(t)
	c := rs.Client(t)
	if err := c.Set(context.Background(), "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	rs.WaitReplicated(t)
	first := rs.Master(t)

	start := time.Now()
	next := rs.KillMaster(t)
	t.Logf("failover after killing %s took %v", first.Addr(), time.Since(start))
	if next == first {
		t.Fatal("KillMaster returned the killed server")
	}
	servedBy(t, rs.Client(t), next, "k", "v")
}
