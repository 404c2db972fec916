package sqllayer

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
)

func TestClassifyByCode(t *testing.T) {
	const pg, my, lite = dialect.PG, dialect.MySQL, dialect.SQLite
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name    string
		err     error
		d       dialect.Name
		want    kind
		mistake mistake
	}{
		{"pg unique", &pgconn.PgError{Code: "23505"}, pg, kindUnique, noMistake},
		{"pg serialization", &pgconn.PgError{Code: "40001"}, pg, kindConflict, noMistake},
		{"pg deadlock", &pgconn.PgError{Code: "40P01"}, pg, kindConflict, noMistake},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, pg, kindBroken, noMistake},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, pg, kindBroken, noMistake},
		{"pg statement timeout", &pgconn.PgError{Code: "57014"}, pg, kindUnavailable, noMistake},
		{"pg too many connections", &pgconn.PgError{Code: "53300"}, pg, kindUnavailable, noMistake},
		{"pg undefined table", &pgconn.PgError{Code: "42P01"}, pg, kindConfig, missingTable},
		{"pg undefined column", &pgconn.PgError{Code: "42703"}, pg, kindConfig, missingColumn},
		{"pg no such schema", &pgconn.PgError{Code: "3F000"}, pg, kindConfig, missingSchema},
		{"pg no such database", &pgconn.PgError{Code: "3D000"}, pg, kindConfig, unknownDatabase},
		{"pg wrong password", &pgconn.PgError{Code: "28P01"}, pg, kindConfig, badCredentials},
		{"pg no such role", &pgconn.PgError{Code: "28000"}, pg, kindConfig, badCredentials},
		{"pg permission denied", &pgconn.PgError{Code: "42501"}, pg, kindConfig, noPrivilege},
		{"pg syntax", &pgconn.PgError{Code: "42601"}, pg, kindOther, noMistake},
		{"pg wrapped", fmt.Errorf("ctx: %w", &pgconn.PgError{Code: "40P01"}), pg, kindConflict, noMistake},
		{"pg joined", errors.Join(errors.New("first host"), &pgconn.PgError{Code: "3D000"}), pg, kindConfig, unknownDatabase},
		{"mysql duplicate", &mysql.MySQLError{Number: 1062}, my, kindUnique, noMistake},
		{"mysql deadlock", &mysql.MySQLError{Number: 1213}, my, kindConflict, noMistake},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, my, kindUnavailable, noMistake},
		{"mariadb connection killed", &mysql.MySQLError{Number: 1927}, my, kindBroken, noMistake},
		{"galera node not ready", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, my, kindUnavailable, noMistake},
		{"galera commit not replicated", &mysql.MySQLError{Number: 1180, Message: `Got error 6 "No such device or address" during COMMIT`}, my, kindUnavailable, noMistake},
		{"mysql packet too large", &mysql.MySQLError{Number: 1153}, my, kindTooLarge, noMistake},
		{"mysql no such table", &mysql.MySQLError{Number: 1146}, my, kindConfig, missingTable},
		{"mysql unknown column", &mysql.MySQLError{Number: 1054}, my, kindConfig, missingColumn},
		{"mysql unknown database", &mysql.MySQLError{Number: 1049}, my, kindConfig, unknownDatabase},
		{"mysql access denied", &mysql.MySQLError{Number: 1045}, my, kindConfig, badCredentials},
		{"mysql database access denied", &mysql.MySQLError{Number: 1044}, my, kindConfig, deniedDatabase},
		{"mysql command denied", &mysql.MySQLError{Number: 1142}, my, kindConfig, noPrivilege},
		{"mysql wrapped", fmt.Errorf("exec: %w", &mysql.MySQLError{Number: 1213}), my, kindConflict, noMistake},
		{"mysql error on another dialect", &mysql.MySQLError{Number: 1213}, pg, kindOther, noMistake},
		{"mysql client packet too large", mysql.ErrPktTooLarge, my, kindTooLarge, noMistake},
		{"mysql invalid connection", mysql.ErrInvalidConn, my, kindBroken, noMistake},
		{"mysql invalid connection wrapped", fmt.Errorf("x: %w", mysql.ErrInvalidConn), my, kindBroken, noMistake},
		{"invalid connection on another dialect", mysql.ErrInvalidConn, pg, kindOther, noMistake},
		{"invalid connection of another type", textErr("invalid connection"), my, kindOther, noMistake},
		{"mysql syntax", &mysql.MySQLError{Number: 1064}, my, kindOther, noMistake},
		{"a Number field alone", &numbered{Number: 1213}, my, kindOther, noMistake},
		{"sqlite unique", &liteErr{code: 2067}, lite, kindUnique, noMistake},
		{"sqlite primary key", &liteErr{code: 1555}, lite, kindUnique, noMistake},
		{"sqlite not null", &liteErr{code: 1299}, lite, kindOther, noMistake},
		{"sqlite busy", &liteErr{code: 5}, lite, kindConflict, noMistake},
		{"sqlite busy snapshot", &liteErr{code: 517}, lite, kindConflict, noMistake},
		{"sqlite ioerr", &liteErr{code: 10}, lite, kindUnavailable, noMistake},
		{"sqlite no such table", &liteErr{1, "SQL logic error: no such table: t (1)"}, lite, kindConfig, missingTable},
		{"sqlite no such column", &liteErr{1, "SQL logic error: no such column: c (1)"}, lite, kindConfig, missingColumn},
		{"sqlite insert into a missing column", &liteErr{1, "SQL logic error: table t has no column named c (1)"}, lite, kindConfig, missingColumn},
		{"sqlite syntax", &liteErr{1, "SQL logic error: near \"SELEC\": syntax error (1)"}, lite, kindOther, noMistake},
		{"no such table with another code", &liteErr{19, "no such table"}, lite, kindOther, noMistake},
		{"Code() of another driver", &liteErr{code: 5}, pg, kindOther, noMistake},
		{"refused", refused, pg, kindBroken, noMistake},
		{"bad conn", driver.ErrBadConn, my, kindBroken, noMistake},
		{"safe to retry", &retryable{safe: true}, pg, kindBroken, noMistake},
		{"not safe to retry", &retryable{safe: false}, pg, kindOther, noMistake},
		{"timeout method", &timedOut{}, pg, kindUnavailable, noMistake},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), pg, kindBroken, noMistake},
		{"deadline", context.DeadlineExceeded, pg, kindUnavailable, noMistake},
		{"canceled", context.Canceled, pg, kindOther, noMistake},
		{"canceled, safe to retry", &retryable{safe: true, err: context.Canceled}, pg, kindOther, noMistake},
		{"untrusted certificate", fmt.Errorf("tls error: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), pg, kindConfig, untrustedServer},
		{"text only", errors.New("deadlock detected (SQLSTATE 40P01)"), pg, kindOther, noMistake},
	} {
		if got, m := diagnose(tc.err, tc.d); got != tc.want || m != tc.mistake {
			t.Errorf("%s: diagnose = %d, %d; want %d, %d", tc.name, got, m, tc.want, tc.mistake)
		}
	}
}

// liteErr has the shape of modernc.org/sqlite's *sqlite.Error.
type liteErr struct {
	code int
	msg  string
}

func (e *liteErr) Error() string { return cmp.Or(e.msg, fmt.Sprintf("sqlite %d", e.code)) }
func (e *liteErr) Code() int     { return e.code }

// numbered has a Number field like *mysql.MySQLError, and nothing else.
type numbered struct{ Number uint16 }

func (e *numbered) Error() string { return fmt.Sprint(e.Number) }

// retryable has pgx's SafeToRetry method.
type retryable struct {
	safe bool
	err  error
}

func (e *retryable) Error() string     { return "retryable" }
func (e *retryable) SafeToRetry() bool { return e.safe }
func (e *retryable) Unwrap() error     { return e.err }

// textErr is an error of a type other than errors.New's.
type textErr string

func (e textErr) Error() string { return string(e) }

// timedOut has a Timeout method, as net.Error and os.ErrDeadlineExceeded do.
type timedOut struct{}

func (timedOut) Error() string { return "i/o timeout" }
func (timedOut) Timeout() bool { return true }

func TestWrapKeepsTheCause(t *testing.T) {
	l := &Layer{dialect: dialect.PG}
	cause := &pgconn.PgError{Code: "57P01"}
	err := l.wrap("reserve", cause)
	var pg *pgconn.PgError
	if !errors.Is(err, idem.ErrUnavailable) || !errors.As(err, &pg) || pg.Code != "57P01" {
		t.Fatalf("wrap = %v: want idem.ErrUnavailable with the driver's error inside", err)
	}
	if again := l.wrap("reserve", err); again != err {
		t.Fatalf("wrapping twice changed the error: %v", again)
	}
	my := &Layer{dialect: dialect.MySQL}
	if err := my.wrap("commit", &mysql.MySQLError{Number: 1213}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a deadlock: %v, want ErrConflict", err)
	}
	if err := l.wrap("get", context.Canceled); !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("a cancellation: %v, want context.Canceled only", err)
	}
}

// TestWrapConfigAdvice: a setup mistake wraps idem.ErrConfig, never
// idem.ErrUnavailable, names the table of the operation and says what to do.
func TestWrapConfigAdvice(t *testing.T) {
	l := &Layer{dialect: dialect.PG, names: names{"recs", "evts", "vers"}}
	for _, tc := range []struct {
		op   string
		err  error
		want string
	}{
		{"reserve", &pgconn.PgError{Code: "42P01"}, `table "recs" does not exist: run Layer.Init, or apply sqllayer.DDL in your migrations`},
		{"mark processed", &pgconn.PgError{Code: "42P01"}, `table "evts" does not exist`},
		{"advance version", &pgconn.PgError{Code: "42703"}, `table "vers" lacks a column`},
		{"delete expired", &pgconn.PgError{Code: "42P01"}, `table "recs" or "evts" does not exist`},
		{"begin", &pgconn.PgError{Code: "3D000"}, "the database named in the DSN does not exist"},
		{"get", &pgconn.PgError{Code: "28P01"}, "authentication failed for the DSN's user: check the DSN's credentials"},
		{"complete", &pgconn.PgError{Code: "42501"}, `lacks a privilege on table "recs"`},
	} {
		err := l.wrap(tc.op, tc.err)
		if !errors.Is(err, idem.ErrConfig) || errors.Is(err, idem.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want idem.ErrConfig, not idem.ErrUnavailable, saying %q", tc.op, err, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v lost the driver's error", tc.op, err)
		}
	}
}

// TestRetryStopsAtConfig: the retry loop, which runs a statement again
// after a conflict or a broken connection, gives up at once on a setup
// mistake, even one that came in a failed connection attempt.
func TestRetryStopsAtConfig(t *testing.T) {
	l := &Layer{dialect: dialect.PG, retries: 3}
	for _, cause := range []error{
		&pgconn.PgError{Code: "42P01"},
		fmt.Errorf("failed to connect: %w", errors.Join(&pgconn.PgError{Code: "28P01"})),
	} {
		calls := 0
		err := l.retry(t.Context(), func() error { calls++; return cause })
		if calls != 1 || err != cause {
			t.Errorf("%v: %d calls, %v; want 1 call", cause, calls, err)
		}
	}
	calls := 0
	_ = l.retry(t.Context(), func() error { calls++; return driver.ErrBadConn })
	if calls != 4 {
		t.Errorf("a broken connection: %d calls, want 4 (the first and 3 retries)", calls)
	}
}

func TestDollars(t *testing.T) {
	for in, want := range map[string]string{
		"a = ?0 AND b = ?1 OR c = ?0": "a = $1 AND b = $2 OR c = $1",
		"?10::bigint":                 "$11::bigint",
		"no arguments":                "no arguments",
	} {
		if got := dollars(in); got != want {
			t.Errorf("dollars(%q) = %q, want %q", in, got, want)
		}
	}
	// Every statement of every dialect numbers all its arguments.
	for _, st := range []stmts{pgStmts, mysqlStmts, sqliteStmts} {
		st.each(func(p *string) {
			if q := dollars(*p); strings.Contains(q, "?") {
				t.Errorf("a bare ? in %s", *p)
			}
		})
	}
}

func TestScanTimes(t *testing.T) {
	want := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	local := time.FixedZone("UTC+2", 2*3600)
	for _, tc := range []struct {
		name string
		src  any
		wall bool
	}{
		{"timestamptz", want.In(local), false},
		{"datetime with loc=UTC", want, true},
		{"datetime with another loc", time.Date(2026, 3, 4, 5, 6, 7, 123456000, local), true},
		{"datetime as text", []byte("2026-03-04 05:06:07.123456"), true},
		{"sqlite micros", want.UnixMicro(), false},
	} {
		d := dbTime{wall: tc.wall}
		if err := d.Scan(tc.src); err != nil || !d.t.Equal(want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, d.t, err, want)
		}
	}
	d := dbTime{}
	if err := d.Scan(nil); err != nil || !d.t.IsZero() {
		t.Errorf("NULL: %v %v", d.t, err)
	}
	if err := d.Scan(true); err == nil {
		t.Error("a bool scanned as a time")
	}
}
