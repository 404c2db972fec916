package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A replicated test cluster: three masters with a replica each, whose
// masters a test kills and fails over.

// haNodeTimeout is cluster-node-timeout of a replicated test cluster: how
// long a master may stay silent before its replica's election starts. Short,
// so that a killed master is replaced in seconds; long enough that a node
// starved for a moment on a loaded machine is not taken for dead.
const haNodeTimeout = 3 * time.Second

// haWait bounds one change of a replicated cluster: an election after a
// kill (the node timeout, then a vote), a restarted node's resync, a forced
// failover's handshake.
const haWait = time.Minute

// StartRedisClusterReplicated starts six cluster-enabled redis-server
// processes on free loopback ports, joins them with redis-cli --cluster
// create --cluster-replicas 1 (three masters, a replica of each), and waits
// until every node reports cluster_state:ok and every replica is in sync.
// The nodes run the defaults a production cluster keeps —
// cluster-require-full-coverage yes among them: while a master is down and
// not yet replaced, the whole cluster refuses commands — with a node
// timeout of 3 s. When redis-server or redis-cli is not installed the test
// is skipped, or fails under IDEM_REQUIRE_SERVICES=1.
func StartRedisClusterReplicated(t testing.TB) *RedisCluster {
	t.Helper()
	cli := redisBinary(t, "redis-cli")
	rc := &RedisCluster{replicas: 1}
	for i := range 2 * clusterMasters {
		args := []string{
			"--cluster-enabled", "yes",
			// Kept in the server's own directory, so that a restarted node
			// knows its identity and rejoins the cluster as a replica.
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", strconv.Itoa(int(haNodeTimeout.Milliseconds())),
		}
		rc.Nodes = append(rc.Nodes, startRedisServer(t, true, append(args, serverSync...)...))
	}
	args := []string{"--cluster", "create"}
	args = append(args, rc.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), haWait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, tail(out, 2000))
	}
	if err := rc.waitHealthy(ctx); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return rc
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	port     int
	master   bool
	failing  bool   // fail or fail? among its flags
	masterID string // a replica's master
	id       string
}

// clusterNodes reads CLUSTER NODES from s.
func clusterNodes(ctx context.Context, s *RedisServer) ([]clusterNode, error) {
	o := s.Options()
	o.MaxRetries, o.PoolSize = -1, 1
	c := redis.NewClient(o)
	defer c.Close()
	out, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr(), err)
	}
	var nodes []clusterNode
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		_, port, _ := strings.Cut(addr, ":")
		p, err := strconv.Atoi(port)
		if err != nil {
			continue // a node whose address is not known yet
		}
		flags := strings.Split(f[2], ",")
		nodes = append(nodes, clusterNode{
			id: f[0], port: p, master: slices.Contains(flags, "master"), masterID: f[3],
			failing: slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"),
		})
	}
	return nodes, nil
}

// node returns the server on port, or nil.
func (rc *RedisCluster) node(port int) *RedisServer {
	for _, n := range rc.Nodes {
		if n.port == port {
			return n
		}
	}
	return nil
}

// Roles returns the masters and the replicas as the first node that
// answers sees them, the replicas in their masters' order (Replicas[i]
// replicates Masters[i] in a healthy cluster).
func (rc *RedisCluster) Roles(ctx context.Context) (masters, replicas []*RedisServer, err error) {
	var errs []error
	for _, s := range rc.Nodes {
		nodes, err := clusterNodes(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		byID := map[string]clusterNode{}
		for _, n := range nodes {
			byID[n.id] = n
		}
		for _, n := range nodes {
			if n.master && !n.failing {
				masters = append(masters, rc.node(n.port))
			}
		}
		for _, m := range masters {
			for _, n := range nodes {
				if !n.master && !n.failing && byID[n.masterID].port == m.port {
					replicas = append(replicas, rc.node(n.port))
				}
			}
		}
		return masters, replicas, nil
	}
	return nil, nil, errors.Join(errs...)
}

// waitHealthy polls until every node answers cluster_state:ok, every node
// sees three masters and three replicas none of which is failing, and every
// replica's link to its master is up with its sync done.
func (rc *RedisCluster) waitHealthy(ctx context.Context) error {
	return poll(ctx, func() error {
		for _, s := range rc.Nodes {
			info, err := clusterInfo(ctx, s)
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("node %s: cluster state not ok", s.Addr())
			}
			nodes, err := clusterNodes(ctx, s)
			if err != nil {
				return err
			}
			var masters, replicas int
			for _, n := range nodes {
				switch {
				case n.failing:
					return fmt.Errorf("node %s sees port %d failing", s.Addr(), n.port)
				case n.master:
					masters++
				default:
					replicas++
				}
			}
			if masters != clusterMasters || replicas != clusterMasters*rc.replicas {
				return fmt.Errorf("node %s sees %d masters and %d replicas", s.Addr(), masters, replicas)
			}
		}
		_, replicas, err := rc.Roles(ctx)
		if err != nil {
			return err
		}
		for _, r := range replicas {
			info, err := serverInfo(ctx, r, "replication")
			if err != nil {
				return err
			}
			if infoField(info, "master_link_status") != "up" || infoField(info, "master_sync_in_progress") != "0" {
				return fmt.Errorf("replica %s: link %s, sync in progress %s", r.Addr(),
					infoField(info, "master_link_status"), infoField(info, "master_sync_in_progress"))
			}
		}
		return nil
	})
}

func clusterInfo(ctx context.Context, s *RedisServer) (string, error) {
	o := s.Options()
	o.MaxRetries, o.PoolSize = -1, 1
	c := redis.NewClient(o)
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER INFO on %s: %w", s.Addr(), err)
	}
	return info, nil
}

// KillMaster kills master (SIGKILL; its data is gone), waits until its
// replica was elected in its place and the cluster serves every slot
// again, then restarts it, empty, and waits until it has rejoined as the
// new master's replica and the cluster is healthy. replaced is when the
// cluster served every slot again (its state ok on every other node).
func (rc *RedisCluster) KillMaster(t testing.TB, master *RedisServer) (replaced time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*haWait)
	defer cancel()
	master.Kill()
	err := poll(ctx, func() error {
		for _, s := range rc.Nodes {
			if s == master {
				continue
			}
			info, err := clusterInfo(ctx, s)
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("node %s: cluster state not ok", s.Addr())
			}
		}
		masters, _, err := rc.Roles(ctx)
		if err != nil {
			return err
		}
		if len(masters) != clusterMasters || slices.Contains(masters, master) {
			return fmt.Errorf("%d masters, the killed one among them: %v", len(masters), slices.Contains(masters, master))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: no replica replaced the killed master %s: %v", master.Addr(), err)
	}
	replaced = time.Now()
	master.Restart()
	if err := rc.waitHealthy(ctx); err != nil {
		t.Fatalf("testenv: the cluster did not heal after %s restarted: %v", master.Addr(), err)
	}
	return replaced
}

// Failover sends CLUSTER FAILOVER to replica, as an operator does to move
// a master (a manual failover: the master stops taking writes until the
// replica has caught up, then the replica takes its slots over), and waits
// until the replica is master and the cluster is healthy, its former
// master now its replica.
func (rc *RedisCluster) Failover(t testing.TB, replica *RedisServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), haWait)
	defer cancel()
	o := replica.Options()
	o.MaxRetries = 2
	c := redis.NewClient(o)
	defer c.Close()
	if err := c.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("testenv: CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
	}
	err := poll(ctx, func() error {
		info, err := serverInfo(ctx, replica, "replication")
		if err != nil {
			return err
		}
		if infoField(info, "role") != "master" {
			return fmt.Errorf("%s still a %s", replica.Addr(), infoField(info, "role"))
		}
		return nil
	})
	if err == nil {
		err = rc.waitHealthy(ctx)
	}
	if err != nil {
		t.Fatalf("testenv: CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
	}
}
