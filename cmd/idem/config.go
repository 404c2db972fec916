package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
)

// config is what every command is given: where the tiers are, the names
// the service uses, and how to print.
type config struct {
	env                              env
	postgres, mysql, sqlite          string
	redisURL, prefix                 string
	records, events, versions, audit string
	timeout                          time.Duration
	json                             bool
}

// bindConfig declares the connection flags on fs, each defaulting to its
// environment variable.
func bindConfig(fs *flag.FlagSet, e env) *config {
	c := &config{env: e}
	str := func(p *string, name, envName, def, usage string) {
		v := e.getenv(envName)
		if v == "" {
			v = def
		}
		fs.StringVar(p, name, v, usage+" (env "+envName+")")
	}
	str(&c.postgres, "postgres", "IDEM_POSTGRES_DSN", "", "Postgres DSN")
	str(&c.mysql, "mysql", "IDEM_MYSQL_DSN", "", "MariaDB or MySQL DSN")
	str(&c.sqlite, "sqlite", "IDEM_SQLITE_DSN", "", "SQLite DSN")
	str(&c.redisURL, "redis", "IDEM_REDIS_URL", "", "Redis URL")
	str(&c.prefix, "redis-prefix", "IDEM_REDIS_PREFIX", redislayer.DefaultPrefix, "the service's Redis key prefix")
	str(&c.records, "records-table", "IDEM_RECORDS_TABLE", sqllayer.DefaultRecordsTable, "the service's records table")
	str(&c.events, "events-table", "IDEM_EVENTS_TABLE", sqllayer.DefaultEventsTable, "the service's processed-events table")
	str(&c.versions, "versions-table", "IDEM_VERSIONS_TABLE", sqllayer.DefaultVersionsTable, "the service's sync-versions table")
	str(&c.audit, "audit-table", "IDEM_AUDIT_TABLE", sqllayer.DefaultAuditTable, "the table of releases and forgets")
	timeout := 10 * time.Second
	if v := e.getenv("IDEM_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	fs.DurationVar(&c.timeout, "timeout", timeout, "the bound on the whole command (env IDEM_TIMEOUT)")
	fs.BoolVar(&c.json, "json", false, "print one JSON document, for scripts")
	return c
}

func (c *config) validate() error {
	n := 0
	for _, dsn := range []string{c.postgres, c.mysql, c.sqlite} {
		if dsn != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("give one database: --postgres, --mysql or --sqlite")
	case n == 0 && c.redisURL == "":
		return errors.New("give a database (--postgres, --mysql, --sqlite) or --redis, or set IDEM_POSTGRES_DSN, IDEM_MYSQL_DSN, IDEM_SQLITE_DSN or IDEM_REDIS_URL")
	case c.timeout <= 0:
		return errors.New("--timeout: give a positive duration")
	}
	return nil
}

// tiers are the opened tiers; each is nil when not configured.
type tiers struct {
	db       *bun.DB
	sql      *sqllayer.Layer
	client   *redis.Client
	redis    *redislayer.Layer
	closeFns []func()
}

func (c *config) open(ctx context.Context) (*tiers, error) {
	t := &tiers{}
	if err := t.openSQL(c); err != nil {
		t.close()
		return nil, err
	}
	if c.redisURL != "" {
		o, err := redis.ParseURL(c.redisURL)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("--redis: %w", err)
		}
		o.ContextTimeoutEnabled = true
		t.client = redis.NewClient(o)
		t.closeFns = append(t.closeFns, func() { _ = t.client.Close() })
		if t.redis, err = redislayer.New(t.client, redislayer.WithPrefix(c.prefix)); err != nil {
			t.close()
			return nil, err
		}
		t.closeFns = append(t.closeFns, func() { _ = t.redis.Close() })
	}
	return t, nil
}

func (t *tiers) openSQL(c *config) error {
	var driver, dsn string
	var open func(*sql.DB) *bun.DB
	switch {
	case c.postgres != "":
		driver, dsn, open = "pgx", c.postgres, func(d *sql.DB) *bun.DB { return bun.NewDB(d, pgdialect.New()) }
	case c.mysql != "":
		driver, dsn, open = "mysql", c.mysql, func(d *sql.DB) *bun.DB { return bun.NewDB(d, mysqldialect.New()) }
	case c.sqlite != "":
		driver, dsn, open = "sqlite", c.sqlite, func(d *sql.DB) *bun.DB { return bun.NewDB(d, sqlitedialect.New()) }
	default:
		return nil
	}
	sqldb, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	sqldb.SetMaxOpenConns(2) // an operator's command: a little of the server, never the pool a service needs
	t.db = open(sqldb)
	t.closeFns = append(t.closeFns, func() { _ = t.db.Close() })
	t.sql, err = sqllayer.New(t.db, sqllayer.WithRecordsTable(c.records), sqllayer.WithEventsTable(c.events),
		sqllayer.WithVersionsTable(c.versions), sqllayer.WithAuditTable(c.audit))
	return err
}

func (t *tiers) close() {
	for i := len(t.closeFns) - 1; i >= 0; i-- {
		t.closeFns[i]()
	}
}
