package sqllayer_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// Advice the errors of setup mistakes carry.
const (
	adviseInit        = "does not exist: run Layer.Init, or apply sqllayer.DDL in your migrations"
	adviseColumn      = "lacks a column this version of sqllayer uses"
	adviseDatabase    = "the database named in the DSN does not exist: create it, or correct the DSN"
	adviseCredentials = "authentication failed for the DSN's user: check the DSN's credentials"
	adviseDenied      = "the DSN's user may not use the database the DSN names"
	advisePrivilege   = "the DSN's user lacks a privilege on table"
)

// calls runs every method of l that asks the database and returns the
// errors by method name.
func calls(t *testing.T, l *sqllayer.Layer, db *bun.DB, withInit bool) map[string]error {
	c := ctx(t)
	k := idem.NewKey("config", testenv.Name("k"))
	errs := map[string]error{}
	_, _, errs["Reserve"] = l.Reserve(c, k, "fp", time.Minute, time.Hour)
	errs["Complete"] = l.Complete(c, k, "token", []byte("paid"), time.Hour)
	errs["Release"] = l.Release(c, k, "token")
	errs["Renew"] = l.Renew(c, k, "token", time.Minute)
	_, errs["Get"] = l.Get(c, k)
	_, errs["DeleteExpired"] = l.DeleteExpired(c, 10)
	_, errs["InTx"] = l.InTx(c, "billing", testenv.Name("evt"), func(context.Context, bun.Tx) error { return nil })
	_, errs["AdvanceVersion"] = l.AdvanceVersion(c, db, "crm", "42", 1)
	_, errs["Version"] = l.Version(c, db, "crm", "42")
	errs["Check"] = l.Check(c)
	if withInit {
		errs["Init"] = l.Init(c)
	}
	return errs
}

// wantConfig fails the test unless err wraps idem.ErrConfig, not
// idem.ErrUnavailable, and says each of advice.
func wantConfig(t *testing.T, method string, err error, advice ...string) {
	t.Helper()
	if !errors.Is(err, idem.ErrConfig) || errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("%s: %v; want idem.ErrConfig and not idem.ErrUnavailable", method, err)
		return
	}
	for _, a := range advice {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("%s: %v; want it to say %q", method, err, a)
		}
	}
}

// TestConfigMissingTables: a layer over a database where Init never ran
// fails every call with idem.ErrConfig naming the missing table and what to
// do, and never with idem.ErrUnavailable (which would make every keyed
// request a "retry later").
func TestConfigMissingTables(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		rec, evt, ver := testenv.Name("idem_norec"), testenv.Name("idem_noevt"), testenv.Name("idem_nover")
		db := s.Open(t)
		l := must.Get(sqllayer.New(db, sqllayer.WithRecordsTable(rec), sqllayer.WithEventsTable(evt), sqllayer.WithVersionsTable(ver)))(t)
		table := map[string]string{
			"Reserve": rec, "Complete": rec, "Release": rec, "Renew": rec, "Get": rec, "Check": rec,
			"InTx": evt, "AdvanceVersion": ver, "Version": ver,
		}
		for method, err := range calls(t, l, db, false) {
			want := fmt.Sprintf("table %q %s", table[method], adviseInit)
			if method == "DeleteExpired" {
				want = fmt.Sprintf("table %q or %q %s", rec, evt, adviseInit)
			}
			wantConfig(t, method, err, want)
		}
		t.Logf("observed: %v", l.Check(ctx(t)))
	})
}

// TestConfigOldTable: a records table that lacks a column the layer uses
// (one made by another version) is a setup mistake, and Check names it.
func TestConfigOldTable(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, db := b.layer(t)
		if _, err := db.ExecContext(ctx(t), "ALTER TABLE "+b.records+" DROP COLUMN fingerprint"); err != nil {
			t.Fatal(err)
		}
		k := idem.NewKey("config", testenv.Name("k"))
		_, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		wantConfig(t, "Reserve", err, fmt.Sprintf("table %q %s", b.records, adviseColumn))
		_, err = l.Get(ctx(t), k)
		wantConfig(t, "Get", err, fmt.Sprintf("table %q %s", b.records, adviseColumn))
		err = l.Check(ctx(t))
		wantConfig(t, "Check", err, fmt.Sprintf("table %q %s", b.records, adviseColumn))
		t.Logf("observed: %v", err)
	})
}

// pgDSN returns the DSN of s with another user and, unless empty, database.
func pgDSN(t *testing.T, s *testenv.SQL, user, database string) string {
	u, err := url.Parse(s.DSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// A key=value DSN: later keys win.
		dsn := s.DSN + " user=" + user
		if database != "" {
			dsn += " dbname=" + database
		}
		return dsn
	}
	u.User = url.User(user)
	if database != "" {
		u.Path = "/" + database
	}
	return u.String()
}

// mysqlDSN returns the DSN of s with another user, password and, unless
// empty, database.
func mysqlDSN(t *testing.T, s *testenv.SQL, user, password, database string) string {
	cfg, err := mysqldriver.ParseDSN(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = user, password
	if database != "" {
		cfg.DBName = database
	}
	return cfg.FormatDSN()
}

// pgRole creates a login role without privileges, dropped when the test
// ends (after the pools opened later are closed).
func pgRole(t *testing.T, admin *bun.DB) string {
	role := testenv.Name("idem_role")
	if _, err := admin.ExecContext(ctx(t), "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	return role
}

// mysqlUser creates a user with password "right", granted grants (GRANT …
// ON <grant> TO the user), dropped when the test ends.
func mysqlUser(t *testing.T, admin *bun.DB, grants ...string) string {
	user := testenv.Name("idem_user")
	if _, err := admin.ExecContext(ctx(t), fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'right'", user)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	for _, g := range grants {
		if _, err := admin.ExecContext(ctx(t), fmt.Sprintf("GRANT %s TO '%s'@'%%'", g, user)); err != nil {
			t.Fatal(err)
		}
	}
	return user
}

// countingConnector counts the connections database/sql asks for.
type countingConnector struct {
	driver.Connector
	n atomic.Int32
}

func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.n.Add(1)
	return c.Connector.Connect(ctx)
}

// openCounting opens a pool over the driver registered as name, which
// counts its connection attempts.
func openCounting(t *testing.T, name, dsn string) (*sql.DB, *countingConnector) {
	probe, err := sql.Open(name, dsn)
	if err != nil {
		t.Fatal(err)
	}
	connector, err := probe.Driver().(driver.DriverContext).OpenConnector(dsn)
	_ = probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConnector{Connector: connector}
	db := sql.OpenDB(cc)
	t.Cleanup(func() { _ = db.Close() })
	return db, cc
}

// setupMistake is a layer that cannot work for a reason of its setup.
type setupMistake struct {
	name   string
	open   func(t *testing.T) (*sql.DB, *countingConnector)
	advice string
}

// TestConfigConnection: a database that does not exist, credentials the
// server refuses, a user without access: every call of the layer fails
// with idem.ErrConfig and the advice, and none is retried: each call asks
// for one connection, where a connection that broke would be asked for
// again (WithRetries).
func TestConfigConnection(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		s := testenv.Postgres(t)
		admin := s.Open(t)
		b := setup(t, s)
		noPrivilege := pgRole(t, admin)
		user, _ := url.Parse(s.DSN)
		pg := func(user, database string) func(t *testing.T) (*sql.DB, *countingConnector) {
			return func(t *testing.T) (*sql.DB, *countingConnector) {
				return openCounting(t, "pgx", pgDSN(t, s, user, database))
			}
		}
		runMistakes(t, b, func(db *sql.DB) *bun.DB { return bun.NewDB(db, pgdialect.New()) }, []setupMistake{
			{"unknown database", pg(user.User.Username(), testenv.Name("idem_nodb")), adviseDatabase},
			{"unknown role", pg(testenv.Name("idem_norole"), ""), adviseCredentials},
			{"no privilege", pg(noPrivilege, ""), advisePrivilege},
		})
	})
	t.Run("mysql", func(t *testing.T) {
		s := testenv.MySQL(t)
		admin := s.Open(t)
		b := setup(t, s)
		cfg, err := mysqldriver.ParseDSN(s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		withPassword := mysqlUser(t, admin)
		oneTable := mysqlUser(t, admin, fmt.Sprintf("SELECT ON `%s`.`%s`", cfg.DBName, b.events))
		my := func(user, password, database string) func(t *testing.T) (*sql.DB, *countingConnector) {
			return func(t *testing.T) (*sql.DB, *countingConnector) {
				return openCounting(t, "mysql", mysqlDSN(t, s, user, password, database))
			}
		}
		runMistakes(t, b, func(db *sql.DB) *bun.DB { return bun.NewDB(db, mysqldialect.New()) }, []setupMistake{
			{"unknown database", my(cfg.User, cfg.Passwd, testenv.Name("idem_nodb")), adviseDatabase},
			{"wrong password", my(withPassword, "wrong", ""), adviseCredentials},
			{"unknown user", my(testenv.Name("idem_nouser"), "right", ""), adviseCredentials},
			{"no access to the database", my(withPassword, "right", ""), adviseDenied},
			{"no privilege", my(oneTable, "right", ""), advisePrivilege},
		})
	})
}

func runMistakes(t *testing.T, b *backend, bunDB func(*sql.DB) *bun.DB, mistakes []setupMistake) {
	for _, m := range mistakes {
		t.Run(m.name, func(t *testing.T) {
			sqldb, cc := m.open(t)
			db := bunDB(sqldb)
			l := must.Get(sqllayer.New(db, append(append([]sqllayer.Option(nil), b.opts...), sqllayer.WithRetries(3))...))(t)
			for method, err := range calls(t, l, db, true) {
				wantConfig(t, method, err, m.advice)
			}
			// One connection attempt per call: nothing was retried.
			c := ctx(t)
			cc.n.Store(0)
			_, _, err := l.Reserve(c, idem.NewKey("config", testenv.Name("k")), "fp", time.Minute, time.Hour)
			if n := cc.n.Load(); m.advice != advisePrivilege && n != 1 {
				t.Errorf("Reserve asked for %d connections, want 1 (%v)", n, err)
			}
			t.Logf("observed: %v", err)
		})
	}
}

// TestCheck: Check answers nil for a layer that can work, idem.ErrConfig
// for a setup mistake and idem.ErrUnavailable for a server that cannot be
// reached or does not answer.
func TestCheck(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		b := setup(t, s)
		l, _ := b.layer(t)
		if err := l.Check(ctx(t)); err != nil {
			t.Fatalf("Check of a layer that works: %v", err)
		}
		for _, which := range []string{"events", "versions"} {
			t.Run("without the "+which+" table", func(t *testing.T) {
				b := setup(t, s)
				l, db := b.layer(t)
				name := map[string]string{"events": b.events, "versions": b.versions}[which]
				if _, err := db.ExecContext(ctx(t), "DROP TABLE "+name); err != nil {
					t.Fatal(err)
				}
				wantConfig(t, "Check", l.Check(ctx(t)), fmt.Sprintf("table %q %s", name, adviseInit))
			})
		}
		_, err := sqllayer.New(s.Open(t), sqllayer.WithRecordsTable("no such; table"))
		wantConfig(t, "New with an invalid table name", err, "WithRecordsTable")
	})
	hung := hungServer(t)
	for _, tc := range []struct {
		name    string
		open    func() (*bun.DB, error)
		timeout time.Duration
	}{
		{"postgres-refused", func() (*bun.DB, error) { return openPG("postgres://x@127.0.0.1:1/x?sslmode=disable") }, 10 * time.Second},
		{"mysql-refused", func() (*bun.DB, error) { return openMySQL("root@tcp(127.0.0.1:1)/x") }, 10 * time.Second},
		{"postgres-hung", func() (*bun.DB, error) { return openPG("postgres://x@" + hung + "/x?sslmode=disable") }, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := tc.open()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			c, cancel := context.WithTimeout(ctx(t), tc.timeout)
			defer cancel()
			err = must.Get(sqllayer.New(db))(t).Check(c)
			if !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrConfig) {
				t.Fatalf("Check: %v, want idem.ErrUnavailable", err)
			}
			t.Logf("observed: %v", err)
		})
	}
}
