package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultproxy"
)

// backends are the Redis and the database the instances share.
type backends struct {
	redisDesc, sqlDesc string

	mini    *miniredis.Miniredis // embedded Redis, nil for a real one
	proxy   *faultproxy.Proxy    // every instance reaches Redis through it, so scenario 4 can kill Redis
	openDB  func() (*bun.DB, error)
	cleanup []func()

	redisErrors atomic.Int64  // Redis failures the instances saw
	observer    idem.Observer // counts them
}

func openBackends(redisURL, pgDSN string) (*backends, error) {
	b := &backends{}
	b.observer = idem.ObserverFunc(func(_ context.Context, e idem.Event) {
		if e.Kind == idem.EventTierError && e.Tier == idem.TierRedis {
			b.redisErrors.Add(1)
		}
	})
	var redisAddr string
	if redisURL == "" {
		b.mini = miniredis.NewMiniRedis()
		b.mini.ClockTTL(true) // TTLs must run down by themselves while the demo serves traffic
		if err := b.mini.Start(); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		b.cleanup = append(b.cleanup, b.mini.Close)
		redisAddr, b.redisDesc = b.mini.Addr(), "embedded miniredis"
	} else {
		o, err := redis.ParseURL(redisURL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		c := redis.NewClient(o)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		_ = c.Close()
		if err != nil {
			return nil, fmt.Errorf("redis at %s does not answer: %w", o.Addr, err)
		}
		redisAddr, b.redisDesc = o.Addr, "redis at "+o.Addr
	}
	p, err := faultproxy.New(redisAddr)
	if err != nil {
		b.close()
		return nil, err
	}
	b.proxy = p
	b.cleanup = append(b.cleanup, func() { _ = p.Close() })

	if pgDSN == "" {
		dir, err := os.MkdirTemp("", "idemdemo-")
		if err != nil {
			b.close()
			return nil, err
		}
		b.cleanup = append(b.cleanup, func() { _ = os.RemoveAll(dir) })
		path := filepath.Join(dir, "demo.db")
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
		b.sqlDesc = "embedded SQLite (" + path + ")"
		b.openDB = func() (*bun.DB, error) {
			sqldb, err := sql.Open("sqlite", dsn)
			if err != nil {
				return nil, err
			}
			return bun.NewDB(sqldb, sqlitedialect.New()), nil
		}
	} else {
		b.sqlDesc = "postgres " + redactDSN(pgDSN)
		b.openDB = func() (*bun.DB, error) {
			sqldb, err := sql.Open("pgx", pgDSN)
			if err != nil {
				return nil, err
			}
			sqldb.SetMaxOpenConns(10)
			return bun.NewDB(sqldb, pgdialect.New()), nil
		}
	}
	db, err := b.openDB()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
		_ = db.Close()
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("database %s does not answer: %w", b.sqlDesc, err)
	}
	return b, nil
}

// redisAddr is the address instances dial: the proxy in front of Redis.
func (b *backends) redisAddr() string { return b.proxy.Addr() }

// killRedis makes Redis unreachable for every instance: new connections
// are refused and open ones reset.
func (b *backends) killRedis() {
	b.proxy.RefuseNew(true)
	b.proxy.ResetAll()
}

// reviveRedis makes Redis reachable again.
func (b *backends) reviveRedis() { b.proxy.RefuseNew(false) }

func (b *backends) close() {
	for i := len(b.cleanup) - 1; i >= 0; i-- {
		b.cleanup[i]()
	}
}

// redactDSN hides a password in a DSN.
func redactDSN(dsn string) string {
	if at := strings.LastIndex(dsn, "@"); at > 0 {
		if scheme := strings.Index(dsn, "://"); scheme >= 0 && scheme < at {
			userinfo := dsn[scheme+3 : at]
			if colon := strings.Index(userinfo, ":"); colon >= 0 {
				return dsn[:scheme+3] + userinfo[:colon] + ":***" + dsn[at:]
			}
		}
	}
	return dsn
}
