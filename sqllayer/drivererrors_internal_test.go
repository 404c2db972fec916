package sqllayer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
)

// The errors real drivers raise, read without importing the drivers: each
// case makes the server (or the driver) fail in one way and checks the kind
// the layer makes of the error and the sentinel its wrap gives callers.
// SQLite has no connection to kill; its lock timeout is SQLITE_BUSY, a
// conflict.

// driverCase is one way to make a real database fail.
type driverCase struct {
	name string
	want kind
	make func(t *testing.T) error
}

// sentinel is the error wrap puts in front of a driver error of kind k.
func sentinel(k kind) error {
	switch k {
	case kindConflict:
		return ErrConflict
	case kindUnavailable, kindBroken:
		return idem.ErrUnavailable
	case kindTooLarge:
		return idem.ErrTooLarge
	case kindConfig:
		return idem.ErrConfig
	}
	return nil
}

func runDriverCases(t *testing.T, d dialect.Name, cases []driverCase) {
	l := &Layer{dialect: d, names: names{"r", "e", "v"}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make(t)
			if err == nil {
				t.Fatal("the database did not fail")
			}
			t.Logf("driver error: %T %v", err, err)
			if got := classify(err, d); got != tc.want {
				t.Fatalf("classify = %d, want %d", got, tc.want)
			}
			wrapped := l.wrap("reserve", err)
			if s := sentinel(tc.want); s != nil && !errors.Is(wrapped, s) {
				t.Fatalf("wrap = %v, want %v", wrapped, s)
			}
			if tc.want == kindConfig && errors.Is(wrapped, idem.ErrUnavailable) {
				t.Fatalf("wrap = %v: a setup mistake is not an outage", wrapped)
			}
		})
	}
}

func bg(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// rowsTable creates a table of two rows (id 1 and 2) on db, dropped when
// the test ends.
func rowsTable(t *testing.T, db *sql.DB) string {
	name := testenv.Name("idem_err")
	if _, err := db.ExecContext(bg(t), "CREATE TABLE "+name+" (id INT PRIMARY KEY, v INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+name) })
	if _, err := db.ExecContext(bg(t), "INSERT INTO "+name+" VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	return name
}

func conn(t *testing.T, db *sql.DB) *sql.Conn {
	c, err := db.Conn(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func begin(t *testing.T, db *sql.DB, opts *sql.TxOptions) *sql.Tx {
	tx, err := db.BeginTx(bg(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

func exec(t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string) {
	if _, err := q.ExecContext(bg(t), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// deadlock runs a and b side by side in two transactions that already
// lock one row each, each asking for the other's row, and returns the
// error of the one the database aborted.
func deadlock(t *testing.T, db *sql.DB, lockA, lockB, a, b string) error {
	txA, txB := begin(t, db, nil), begin(t, db, nil)
	exec(t, txA, lockA)
	exec(t, txB, lockB)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for tx, q := range map[*sql.Tx]string{txA: a, txB: b} {
		wg.Go(func() {
			_, err := tx.ExecContext(bg(t), q)
			if err != nil {
				_ = tx.Rollback() // lets the other through
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d of the two transactions failed (%v), want one", len(failed), failed)
	}
	return failed[0]
}

// waitFor polls query on db until it returns a count above 0.
func waitFor(t *testing.T, db *sql.DB, query string) {
	deadline := time.Now().Add(10 * time.Second)
	var (
		n   int
		err error
	)
	for time.Now().Before(deadline) {
		if err = db.QueryRowContext(bg(t), query).Scan(&n); err == nil && n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the server's view of another session
	}
	t.Fatalf("never true: %s (last %d, %v)", query, n, err)
}

func TestPostgresDriverErrors(t *testing.T) {
	s := testenv.Postgres(t)
	db := s.Open(t).DB
	x := rowsTable(t, db)
	runDriverCases(t, dialect.PG, []driverCase{
		{"unique violation", kindUnique, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "INSERT INTO "+x+" VALUES (1, 0)")
			return err
		}},
		{"serialization failure", kindConflict, func(t *testing.T) error {
			tx := begin(t, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			exec(t, tx, "SELECT v FROM "+x+" WHERE id = 1") // the snapshot
			exec(t, db, "UPDATE "+x+" SET v = v + 1 WHERE id = 1")
			_, err := tx.ExecContext(bg(t), "UPDATE "+x+" SET v = v + 1 WHERE id = 1")
			return err
		}},
		{"deadlock", kindConflict, func(t *testing.T) error {
			lock := func(id int) string { return fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", x, id) }
			return deadlock(t, db, lock(1), lock(2), lock(2), lock(1))
		}},
		{"killed connection", kindBroken, func(t *testing.T) error {
			app := testenv.Name("idemkill")
			victim := testenv.WithApplicationName(t, s, app).Open(t).DB
			done := make(chan error, 1)
			go func() {
				_, err := victim.ExecContext(bg(t), "SELECT pg_sleep(30)")
				done <- err
			}()
			waitFor(t, db, fmt.Sprintf("SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s' AND state = 'active'", app))
			exec(t, db, fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '%s'", app))
			return <-done
		}},
		{"statement timeout", kindUnavailable, func(t *testing.T) error {
			c := conn(t, db)
			exec(t, c, "SET statement_timeout = 50")
			_, err := c.ExecContext(bg(t), "SELECT pg_sleep(5)")
			return err
		}},
		{"deadline", kindUnavailable, func(t *testing.T) error {
			c, cancel := context.WithTimeout(bg(t), 50*time.Millisecond)
			defer cancel()
			_, err := db.ExecContext(c, "SELECT pg_sleep(5)")
			return err
		}},
		{"too large", kindTooLarge, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT repeat('x', 1073741824)") // refused before any allocation
			return err
		}},
		{"missing table", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT 1 FROM "+testenv.Name("idem_missing"))
			return err
		}},
		{"missing column", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT lease_until FROM "+x)
			return err
		}},
		{"untrusted server certificate", kindConfig, func(t *testing.T) error {
			bad, err := sql.Open("pgx", "postgres://x@"+untrustedTLS(t)+"/x?sslmode=verify-full&connect_timeout=10")
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			_, err = bad.ExecContext(bg(t), "SELECT 1")
			return err
		}},
	})
}

// untrustedTLS listens for one Postgres client, accepts its SSLRequest and
// shows it a self-signed certificate, which verify-full refuses; it
// returns the listener's address.
func untrustedTLS(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req [8]byte // length and the SSLRequest code
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		if _, err := c.Write([]byte("S")); err != nil {
			return
		}
		srv := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
		_ = srv.Handshake() // the client refuses the certificate
	})
	return ln.Addr().String()
}

func TestMySQLDriverErrors(t *testing.T) {
	s := testenv.MySQL(t)
	db := s.Open(t).DB
	x := rowsTable(t, db)
	// killWaiting kills the connection of c while its query waits for row
	// 2, which another transaction holds, and returns the query's error.
	killWaiting := func(t *testing.T, c *sql.Conn) error {
		var id int64
		if err := c.QueryRowContext(bg(t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		holder := begin(t, db, nil)
		exec(t, holder, "SELECT v FROM "+x+" WHERE id = 2 FOR UPDATE")
		done := make(chan error, 1)
		go func() {
			_, err := c.ExecContext(bg(t), "UPDATE "+x+" SET v = v + 1 WHERE id = 2")
			done <- err
		}()
		waitFor(t, db, fmt.Sprintf("SELECT count(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = %d AND trx_state = 'LOCK WAIT'", id))
		exec(t, db, fmt.Sprintf("KILL CONNECTION %d", id))
		return <-done
	}
	bigQuery := func(n int) string { return "SELECT '" + strings.Repeat("x", n) + "'" }
	runDriverCases(t, dialect.MySQL, []driverCase{
		{"unique violation", kindUnique, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "INSERT INTO "+x+" VALUES (1, 0)")
			return err
		}},
		{"deadlock", kindConflict, func(t *testing.T) error {
			lock := func(id int) string { return fmt.Sprintf("SELECT v FROM %s WHERE id = %d FOR UPDATE", x, id) }
			return deadlock(t, db, lock(1), lock(2), lock(2), lock(1))
		}},
		{"killed while waiting", kindBroken, func(t *testing.T) error {
			// go-sql-driver/mysql's ErrInvalidConn, an errors.New value.
			return killWaiting(t, conn(t, db))
		}},
		{"killed, then used", kindBroken, func(t *testing.T) error {
			c := conn(t, db)
			var id int64
			if err := c.QueryRowContext(bg(t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			exec(t, db, fmt.Sprintf("KILL CONNECTION %d", id))
			waitFor(t, db, fmt.Sprintf("SELECT count(*) = 0 FROM information_schema.processlist WHERE id = %d", id))
			_, err := c.ExecContext(bg(t), "SELECT 1")
			return err
		}},
		{"lock wait timeout", kindUnavailable, func(t *testing.T) error {
			c := conn(t, db)
			exec(t, c, "SET SESSION innodb_lock_wait_timeout = 1")
			exec(t, begin(t, db, nil), "SELECT v FROM "+x+" WHERE id = 1 FOR UPDATE")
			_, err := c.ExecContext(bg(t), "UPDATE "+x+" SET v = v + 1 WHERE id = 1")
			return err
		}},
		{"statement time limit", kindUnavailable, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SET STATEMENT max_statement_time = 0.01 FOR SELECT SLEEP(5)")
			return err
		}},
		{"deadline", kindUnavailable, func(t *testing.T) error {
			c, cancel := context.WithTimeout(bg(t), 50*time.Millisecond)
			defer cancel()
			_, err := db.ExecContext(c, "SELECT SLEEP(5)")
			return err
		}},
		{"packet over the server's limit", kindTooLarge, func(t *testing.T) error {
			var limit int
			if err := db.QueryRowContext(bg(t), "SELECT @@max_allowed_packet").Scan(&limit); err != nil {
				t.Fatal(err)
			}
			_, err := db.ExecContext(bg(t), bigQuery(limit+1))
			return err
		}},
		{"packet over the driver's limit", kindTooLarge, func(t *testing.T) error {
			// go-sql-driver/mysql's ErrPktTooLarge, an errors.New value.
			small := (&testenv.SQL{Kind: s.Kind, DSN: s.DSN + "&maxAllowedPacket=4096", Real: true}).Open(t).DB
			_, err := small.ExecContext(bg(t), bigQuery(8192))
			return err
		}},
		{"missing table", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT 1 FROM "+testenv.Name("idem_missing"))
			return err
		}},
		{"missing column", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT lease_until FROM "+x)
			return err
		}},
	})
}

func TestSQLiteDriverErrors(t *testing.T) {
	s := testenv.SQLiteFile(t)
	db := s.Open(t).DB
	x := rowsTable(t, db)
	// other opens a second pool on the same file, with the given busy
	// timeout in milliseconds.
	other := func(t *testing.T, busyMs int) *sql.DB {
		dsn := strings.Replace(s.DSN, "busy_timeout(10000)", fmt.Sprintf("busy_timeout(%d)", busyMs), 1)
		return (&testenv.SQL{Kind: s.Kind, DSN: dsn}).Open(t).DB
	}
	writing := func(t *testing.T) {
		c := conn(t, db)
		exec(t, c, "BEGIN IMMEDIATE")
		t.Cleanup(func() { _, _ = c.ExecContext(context.Background(), "ROLLBACK") })
	}
	runDriverCases(t, dialect.SQLite, []driverCase{
		{"unique violation", kindUnique, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "INSERT INTO "+x+" VALUES (1, 0)")
			return err
		}},
		{"busy", kindConflict, func(t *testing.T) error {
			writing(t)
			_, err := other(t, 0).ExecContext(bg(t), "UPDATE "+x+" SET v = v + 1 WHERE id = 1")
			return err
		}},
		{"busy timeout", kindConflict, func(t *testing.T) error {
			writing(t)
			_, err := other(t, 50).ExecContext(bg(t), "UPDATE "+x+" SET v = v + 1 WHERE id = 1")
			return err
		}},
		{"deadline", kindUnavailable, func(t *testing.T) error {
			c, cancel := context.WithTimeout(bg(t), 50*time.Millisecond)
			defer cancel()
			_, err := db.ExecContext(c, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n")
			return err
		}},
		{"too large", kindTooLarge, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT zeroblob(2000000000)") // refused before any allocation
			return err
		}},
		{"missing table", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT 1 FROM "+testenv.Name("idem_missing"))
			return err
		}},
		{"missing column", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "SELECT lease_until FROM "+x)
			return err
		}},
		{"insert into a missing column", kindConfig, func(t *testing.T) error {
			_, err := db.ExecContext(bg(t), "INSERT INTO "+x+" (id, v, lease_until) VALUES (3, 0, 0)")
			return err
		}},
	})
}
