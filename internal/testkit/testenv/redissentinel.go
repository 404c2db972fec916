package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelMasterName is the name under which a test Sentinel monitors its
// master: what clients pass as FailoverOptions.MasterName (MasterName).
const sentinelMasterName = "idemtest"

// Sentinel timings. Short, so that a failover ends in a few seconds; yet
// down-after is long enough that a server starved for a moment on a loaded
// machine is not taken for dead and failed over in the middle of a test
// (with a quorum of 1, Sentinel does that on its own), and the failover
// timeout, after which Sentinel gives up on a replica slow to confirm its
// promotion, leaves that confirmation (read every second) a few tries.
const (
	sentinelDownAfter       = 2 * time.Second
	sentinelFailoverTimeout = 5 * time.Second
	// sentinelWait bounds a failover, a replica's sync and Sentinel's first
	// view of the servers: each takes a second or a few, more on a loaded
	// machine.
	sentinelWait = 30 * time.Second
)

// serverSync is given to both data servers, since either may be master after
// a failover: a replica's full sync starts at once instead of after the
// default 5 s wait for more replicas to join.
var serverSync = []string{"--repl-diskless-sync-delay", "0"}

// RedisSentinel is a master redis-server, one replica and one Sentinel
// monitoring them (quorum 1), all on loopback ports with no persistence,
// owned by one test and stopped when it ends. When redis-server is not
// installed the test is skipped, or fails under IDEM_REQUIRE_SERVICES=1.
//
// Sentinel, not this type, decides which server is master: Master asks it.
type RedisSentinel struct {
	servers  [2]*RedisServer // started as master and replica; roles swap on failover
	sentinel *sentinelNode
}

// sentinelNode is a redis-server in Sentinel mode. It has a config file of
// its own, which Sentinel rewrites as it learns, so it cannot be a
// RedisServer, whose arguments come without one.
type sentinelNode struct {
	port int
	dir  string
	proc *process
}

// StartRedisSentinel starts a master, a replica of it and a Sentinel, and
// waits until the replica is in sync and Sentinel sees both servers healthy,
// so that a failover can start at once.
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	bin := redisBinary(t, "redis-server")
	master := startRedisServer(t, false, serverSync...)
	replica := startRedisServer(t, false,
		append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)}, serverSync...)...)
	rs := &RedisSentinel{servers: [2]*RedisServer{master, replica}}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelWait)
	defer cancel()
	// Sentinel learns of replicas from the master's INFO, which it reads
	// first on connecting and then only every 10 s: a replica not yet
	// attached at that moment would be unknown to it for as long.
	if err := waitReplica(ctx, replica, master); err != nil {
		t.Fatalf("testenv: replica did not sync: %v", err)
	}
	rs.sentinel = startSentinel(t, bin, master.port)
	if err := rs.waitHealthy(ctx, master, replica); err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	return rs
}

// MasterName returns the name Sentinel monitors the master under.
func (rs *RedisSentinel) MasterName() string { return sentinelMasterName }

// SentinelAddrs returns the Sentinels' host:port addresses (one).
func (rs *RedisSentinel) SentinelAddrs() []string {
	return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(rs.sentinel.port))}
}

// FailoverOptions returns fresh options for redis.NewFailoverClient, with
// context deadlines honoured on socket I/O.
func (rs *RedisSentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            sentinelMasterName,
		SentinelAddrs:         rs.SentinelAddrs(),
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new failover client of its own, which asks Sentinel for
// the master and follows its switches; it is closed when the test ends.
func (rs *RedisSentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(rs.FailoverOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Servers returns the two data servers: the one started as master, then the
// one started as its replica. Which is master now is Master's to say.
func (rs *RedisSentinel) Servers() [2]*RedisServer { return rs.servers }

// Master returns the server Sentinel reports as master now.
func (rs *RedisSentinel) Master(t testing.TB) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := rs.master(ctx)
	if err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	return m
}

// WaitReplicated waits until the replica has applied everything the master
// had written when it was called, so that those writes survive a failover
// (Redis replicates asynchronously: a failover loses what the replica has
// not received yet). It is for a settled pair: after Failover the former
// master becomes a replica only when Sentinel converts it, some ten seconds
// later.
func (rs *RedisSentinel) WaitReplicated(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sentinelWait)
	defer cancel()
	m, err := rs.master(ctx)
	if err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	info, err := serverInfo(ctx, m, "replication")
	if err != nil {
		t.Fatalf("testenv: INFO on master %s: %v", m.Addr(), err)
	}
	offset, err := strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64)
	if err != nil {
		t.Fatalf("testenv: master %s: master_repl_offset: %v", m.Addr(), err)
	}
	r := rs.other(m)
	err = poll(ctx, func() error {
		info, err := serverInfo(ctx, r, "replication")
		if err != nil {
			return err
		}
		if err := replicating(info, m); err != nil {
			return err
		}
		got, err := strconv.ParseInt(infoField(info, "slave_repl_offset"), 10, 64)
		if err != nil || got < offset {
			return fmt.Errorf("replica %s at offset %d, master at %d (%v)", r.Addr(), got, offset, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: replication: %v", err)
	}
}

// Failover makes Sentinel promote the replica (SENTINEL FAILOVER), waits
// until Sentinel reports it as master, and returns it. Failover clients
// learn of the switch from Sentinel's +switch-master message a moment
// later. The former master keeps running, and keeps accepting writes as a
// master until Sentinel converts it into a replica of the new one about ten
// seconds later: a client that has not yet seen the switch may write to it
// in between, and those writes are lost, as in production. A second
// Failover waits for that conversion, since until then there is no replica
// to promote.
func (rs *RedisSentinel) Failover(t testing.TB) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*sentinelWait)
	defer cancel()
	old, err := rs.master(ctx)
	if err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	next := rs.other(old)
	sc := rs.sentinelClient()
	defer sc.Close()
	for {
		// Sentinel refuses with NOGOODSLAVE until it has seen a healthy
		// replica, and with INPROG while a failover it started itself is
		// running.
		err := poll(ctx, func() error {
			err := sc.Failover(ctx, sentinelMasterName).Err()
			if err != nil && strings.HasPrefix(err.Error(), "INPROG") {
				return nil // one is running already: wait for its outcome
			}
			return err
		})
		if err != nil {
			t.Fatalf("testenv: SENTINEL FAILOVER %s: %v", sentinelMasterName, err)
		}
		// A failover Sentinel accepted can still be abandoned: when the
		// replica it promotes (one that was resyncing after a restart, say)
		// does not confirm within the failover timeout, the master stays.
		// Then it is asked again, until sentinelWait twice over.
		wait, stop := context.WithTimeout(ctx, 2*sentinelFailoverTimeout+2*time.Second)
		err = rs.waitMaster(wait, next)
		stop()
		if err == nil {
			return next
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: failover from %s to %s: %v", old.Addr(), next.Addr(), err)
		}
	}
}

// KillMaster kills the master with SIGKILL, waits until Sentinel has found
// it down and promoted the replica (down-after plus the failover: some
// seconds), and returns the new master. The killed server stays down; its
// Restart brings it back empty with the arguments it first had, and Sentinel
// makes it a replica of the current master some seconds later.
func (rs *RedisSentinel) KillMaster(t testing.TB) *RedisServer {
	t.Helper()
	return rs.switchMaster(t, "kill", func(_ context.Context, old *RedisServer) error {
		old.Kill()
		return nil
	})
}

// switchMaster asks Sentinel for the master, runs move on it, waits until
// Sentinel reports the other data server as master, and returns that one.
func (rs *RedisSentinel) switchMaster(t testing.TB, how string, move func(ctx context.Context, old *RedisServer) error) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sentinelWait)
	defer cancel()
	old, err := rs.master(ctx)
	if err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	next := rs.other(old)
	if err := move(ctx, old); err != nil {
		t.Fatalf("testenv: %s: %v", how, err)
	}
	if err := rs.waitMaster(ctx, next); err != nil {
		t.Fatalf("testenv: %s from %s to %s: %v", how, old.Addr(), next.Addr(), err)
	}
	return next
}

// other returns the data server that is not s.
func (rs *RedisSentinel) other(s *RedisServer) *RedisServer {
	if s == rs.servers[0] {
		return rs.servers[1]
	}
	return rs.servers[0]
}

// sentinelClient returns a client of the Sentinel for one helper call.
func (rs *RedisSentinel) sentinelClient() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: rs.SentinelAddrs()[0], MaxRetries: -1,
		PoolSize: 1, ContextTimeoutEnabled: true})
}

// master asks Sentinel which data server is master.
func (rs *RedisSentinel) master(ctx context.Context) (*RedisServer, error) {
	sc := rs.sentinelClient()
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
	if err != nil {
		return nil, fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %w", sentinelMasterName, err)
	}
	for _, s := range rs.servers {
		if len(addr) == 2 && strconv.Itoa(s.port) == addr[1] {
			return s, nil
		}
	}
	return nil, fmt.Errorf("sentinel reports master %v, none of this test's servers", addr)
}

// startSentinel starts a Sentinel monitoring the master on masterPort and
// waits until it answers PING.
func startSentinel(t testing.TB, bin string, masterPort int) *sentinelNode {
	t.Helper()
	n := &sentinelNode{dir: t.TempDir()}
	t.Cleanup(n.stop)
	conf := filepath.Join(n.dir, "sentinel.conf")
	// Only what must live in the file is in it; the rest is on the command
	// line, where redis-server quotes paths itself.
	body := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\n"+
		"sentinel down-after-milliseconds %[1]s %[3]d\n"+
		"sentinel failover-timeout %[1]s %[4]d\n",
		sentinelMasterName, masterPort, sentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds())
	logfile := filepath.Join(n.dir, "sentinel.log")
	var err error
	for range 5 { // a free port can be taken by someone else before we bind it
		if n.port, err = freePort(false); err != nil {
			continue
		}
		// Rewritten on each attempt: Sentinel rewrites it as it starts.
		if err = os.WriteFile(conf, []byte(body), 0o600); err != nil {
			break
		}
		var p *process
		p, err = startProcess(bin, []string{conf, "--sentinel",
			"--port", strconv.Itoa(n.port),
			"--bind", "127.0.0.1",
			"--dir", n.dir,
			"--logfile", logfile,
		})
		if err != nil {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
		if err = waitReady(addr, p); err != nil {
			p.kill()
			log, _ := os.ReadFile(logfile)
			err = fmt.Errorf("%w; log:\n%s", err, tail(log, 800))
			continue
		}
		n.proc = p
		return n
	}
	t.Fatalf("testenv: redis-server --sentinel did not start: %v", err)
	return nil
}

func (n *sentinelNode) stop() {
	if n.proc != nil {
		n.proc.kill()
		n.proc = nil
	}
}
