package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is the number of master nodes of a test cluster.
const clusterMasters = 3

// RedisCluster is a real Redis Cluster of three masters on loopback ports,
// without replicas (StartRedisCluster) or with one each
// (StartRedisClusterReplicated), owned by one test and removed when it ends.
type RedisCluster struct {
	// Nodes are the servers, in the order they were started: without
	// replicas, the masters. Which of them is master now is Roles's to say.
	Nodes []*RedisServer

	replicas int // per master
}

// StartRedisCluster starts three cluster-enabled redis-server processes,
// joins them with redis-cli --cluster create, and waits until every node
// reports cluster_state:ok. When redis-server or redis-cli is not installed
// the test is skipped, or fails under IDEM_REQUIRE_SERVICES=1.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	cli := redisBinary(t, "redis-cli")
	rc := &RedisCluster{}
	for i := range clusterMasters {
		rc.Nodes = append(rc.Nodes, startRedisServer(t, true,
			"--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", "5000",
		))
	}
	args := []string{"--cluster", "create"}
	args = append(args, rc.Addrs()...)
	args = append(args, "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, tail(out, 2000))
	}
	if err := rc.waitOK(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return rc
}

// Addrs returns the nodes' host:port addresses.
func (rc *RedisCluster) Addrs() []string {
	addrs := make([]string, len(rc.Nodes))
	for i, n := range rc.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// ClusterOptions returns fresh client options for the cluster, with context
// deadlines honoured on socket I/O.
func (rc *RedisCluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: rc.Addrs(), ContextTimeoutEnabled: true}
}

// Client returns a new cluster client of its own, closed when the test ends.
func (rc *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(rc.ClusterOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitOK polls CLUSTER INFO on every node until all say cluster_state:ok
// and agree on the number of known nodes.
func (rc *RedisCluster) waitOK() error {
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range rc.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, PoolSize: 1})
		var info string
		var err error
		for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
			info, err = c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", clusterMasters)) {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				return fmt.Errorf("cluster node %s not ok after 30s: %v\n%s", n.Addr(), err, info)
			}
			time.Sleep(delay) // between polls of a cluster still converging
		}
		_ = c.Close()
	}
	return nil
}
