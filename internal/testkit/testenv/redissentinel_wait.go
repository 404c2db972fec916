package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waiting for the Sentinel pair to reach a state: a master elected, a
// replica in sync, each asked until a deadline.

// waitMaster polls Sentinel until it reports want as master.
func (rs *RedisSentinel) waitMaster(ctx context.Context, want *RedisServer) error {
	return poll(ctx, func() error {
		m, err := rs.master(ctx)
		if err != nil {
			return err
		}
		if m != want {
			return fmt.Errorf("sentinel still reports %s as master", m.Addr())
		}
		return nil
	})
}

// waitHealthy polls Sentinel until it monitors master and knows replica as
// connected, up and in sync: what it needs to pick it in a failover.
func (rs *RedisSentinel) waitHealthy(ctx context.Context, master, replica *RedisServer) error {
	sc := rs.sentinelClient()
	defer sc.Close()
	return poll(ctx, func() error {
		m, err := sc.Master(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("SENTINEL MASTER: %w", err)
		}
		if m["port"] != strconv.Itoa(master.port) || m["flags"] != "master" {
			return fmt.Errorf("master %s:%s has flags %q", m["ip"], m["port"], m["flags"])
		}
		replicas, err := sc.Replicas(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("SENTINEL REPLICAS: %w", err)
		}
		for _, r := range replicas {
			if r["port"] == strconv.Itoa(replica.port) && r["flags"] == "slave" && r["master-link-status"] == "ok" {
				return nil
			}
		}
		return fmt.Errorf("replica %s not seen healthy yet: %v", replica.Addr(), replicas)
	})
}

// waitReplica polls replica until its link to master is up and its first
// sync is done.
func waitReplica(ctx context.Context, replica, master *RedisServer) error {
	return poll(ctx, func() error {
		info, err := serverInfo(ctx, replica, "replication")
		if err != nil {
			return err
		}
		return replicating(info, master)
	})
}

// replicating checks, from a server's INFO replication, that it is a
// replica of master with its link up and no sync in progress.
func replicating(info string, master *RedisServer) error {
	if infoField(info, "role") != "slave" || infoField(info, "master_port") != strconv.Itoa(master.port) {
		return fmt.Errorf("not a replica of %s: role %s of port %s", master.Addr(),
			infoField(info, "role"), infoField(info, "master_port"))
	}
	if infoField(info, "master_link_status") != "up" || infoField(info, "master_sync_in_progress") != "0" {
		return fmt.Errorf("link to %s %s, sync in progress %s", master.Addr(),
			infoField(info, "master_link_status"), infoField(info, "master_sync_in_progress"))
	}
	return nil
}

// serverInfo returns a section of s's INFO over a connection of its own.
func serverInfo(ctx context.Context, s *RedisServer, section string) (string, error) {
	o := s.Options()
	o.MaxRetries, o.PoolSize = -1, 1
	c := redis.NewClient(o)
	defer c.Close()
	return c.Info(ctx, section).Result()
}

// infoField returns the value of key in INFO output, or "".
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// poll calls check until it returns nil or ctx ends, backing off from 10 ms
// to 200 ms, and returns check's last error with ctx's.
func poll(ctx context.Context, check func() error) error {
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(delay): // between polls of servers still converging
		}
	}
}
