package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var getenv = os.Getenv

// SQL is one SQL backend a test can open any number of pools on.
type SQL struct {
	// Kind is "postgres", "mysql", "sqlite-file" or "sqlite-memory".
	Kind string
	// DSN is what Open passes to the driver.
	DSN string
	// Real reports whether this is a server (Postgres, MariaDB/MySQL).
	Real bool

	shared *bun.DB // sqlite-memory: one pool, since each connection would be its own database
}

// Open returns a *bun.DB over the backend, closed when the test ends. Each
// call opens its own pool, as a separate service instance would — except for
// in-memory SQLite, where every call returns the one pool that holds the
// database.
func (s *SQL) Open(t testing.TB) *bun.DB {
	t.Helper()
	if s.shared != nil {
		return s.shared
	}
	db, err := open(s.Kind, s.DSN)
	if err != nil {
		t.Fatalf("open %s: %v", s.Kind, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// MaxTestConns is the most connections a test's pool over a real server
// opens: the server is shared by every package's tests running at once, and
// a test that opened pools without a limit ran it out of connections beside
// other work. A test that needs another limit sets it on its pool.
const MaxTestConns = 8

func open(kind, dsn string) (*bun.DB, error) {
	switch kind {
	case "postgres":
		sqldb, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, err
		}
		sqldb.SetMaxOpenConns(MaxTestConns)
		return bun.NewDB(sqldb, pgdialect.New()), nil
	case "mysql":
		sqldb, err := sql.Open("mysql", dsn)
		if err != nil {
			return nil, err
		}
		sqldb.SetMaxOpenConns(MaxTestConns)
		return bun.NewDB(sqldb, mysqldialect.New()), nil
	case "sqlite-file", "sqlite-memory":
		sqldb, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		if kind == "sqlite-memory" {
			sqldb.SetMaxOpenConns(1)
			sqldb.SetConnMaxLifetime(0)
			sqldb.SetConnMaxIdleTime(0)
		}
		return bun.NewDB(sqldb, sqlitedialect.New()), nil
	}
	return nil, fmt.Errorf("testenv: unknown SQL kind %q", kind)
}

// ping opens the backend once and checks it answers.
func ping(kind, dsn string) error {
	db, err := open(kind, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// PostgresDSN returns the DSN of the real Postgres, or an error saying why
// there is none.
func PostgresDSN() (string, error) {
	dsn := DefaultPostgresDSN
	if v := getenv(EnvPostgres); v != "" {
		dsn = v
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	if err := reachable(fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)); err != nil && !strings.HasPrefix(cfg.Host, "/") {
		return "", err
	}
	return dsn, ping("postgres", dsn)
}

// MySQLDSN returns the DSN of the real MariaDB/MySQL, or an error saying why
// there is none. The DSN always has parseTime=true and loc=UTC.
func MySQLDSN() (string, error) {
	dsn := DefaultMySQLDSN
	if v := getenv(EnvMySQL); v != "" {
		dsn = v
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	dsn = cfg.FormatDSN()
	if cfg.Net == "tcp" {
		if err := reachable(cfg.Addr); err != nil {
			return "", err
		}
	}
	return dsn, ping("mysql", dsn)
}

// Postgres returns the real Postgres, or skips the test (fails it under
// IDEM_REQUIRE_SERVICES=1).
func Postgres(t testing.TB) *SQL {
	t.Helper()
	dsn, err := PostgresDSN()
	if err != nil {
		missing(t, "postgres", err.Error())
	}
	return &SQL{Kind: "postgres", DSN: dsn, Real: true}
}

// MySQL returns the real MariaDB/MySQL, or skips the test (fails it under
// IDEM_REQUIRE_SERVICES=1).
func MySQL(t testing.TB) *SQL {
	t.Helper()
	dsn, err := MySQLDSN()
	if err != nil {
		missing(t, "mysql", err.Error())
	}
	return &SQL{Kind: "mysql", DSN: dsn, Real: true}
}

// SQLiteFile returns a SQLite database in a file under t.TempDir, in WAL mode
// with a busy timeout, so several pools can share it.
func SQLiteFile(t testing.TB) *SQL {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	return &SQL{Kind: "sqlite-file", DSN: "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"}
}

// SQLiteMemory returns an in-memory SQLite database held by one pool of one
// connection (every pool Open returns is that one), dropped when the test
// ends.
func SQLiteMemory(t testing.TB) *SQL {
	t.Helper()
	s := &SQL{Kind: "sqlite-memory", DSN: "file:" + Name("mem") + "?mode=memory&_pragma=busy_timeout(10000)"}
	db, err := open(s.Kind, s.DSN)
	if err != nil {
		t.Fatalf("open sqlite-memory: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s.shared = db
	return s
}

// AnySQL returns the real Postgres when there is one, else a SQLite file
// (a failure instead under IDEM_REQUIRE_SERVICES=1).
func AnySQL(t testing.TB) *SQL {
	t.Helper()
	dsn, err := PostgresDSN()
	if err == nil {
		t.Logf("testenv: real postgres")
		return &SQL{Kind: "postgres", DSN: dsn, Real: true}
	}
	if Required() {
		t.Fatalf("postgres is required (%s=1) but unavailable: %v", EnvRequire, err)
	}
	t.Logf("testenv: no real postgres (%v): using sqlite", err)
	return SQLiteFile(t)
}

// AllSQL runs fn as a subtest for every SQL backend: Postgres and MariaDB
// when reachable (required under IDEM_REQUIRE_SERVICES=1, skipped
// otherwise), SQLite in a file and in memory always.
func AllSQL(t *testing.T, fn func(t *testing.T, s *SQL)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
	t.Run("mysql", func(t *testing.T) { fn(t, MySQL(t)) })
	t.Run("sqlite-file", func(t *testing.T) { fn(t, SQLiteFile(t)) })
	t.Run("sqlite-memory", func(t *testing.T) { fn(t, SQLiteMemory(t)) })
}
