package sqllayer

import (
	"context"
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

	"github.com/idemkit/idem"
)

// liteErr has the shape of modernc.org/sqlite's *sqlite.Error.
type liteErr struct{ code int }

func (e *liteErr) Error() string { return fmt.Sprintf("sqlite %d", e.code) }
func (e *liteErr) Code() int     { return e.code }

func TestClassifyByCode(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name   string
		err    error
		sqlite bool
		want   kind
	}{
		{"pg unique", &pgconn.PgError{Code: "23505"}, false, kindUnique},
		{"pg serialization", &pgconn.PgError{Code: "40001"}, false, kindConflict},
		{"pg deadlock", &pgconn.PgError{Code: "40P01"}, false, kindConflict},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, false, kindBroken},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, false, kindBroken},
		{"pg statement timeout", &pgconn.PgError{Code: "57014"}, false, kindUnavailable},
		{"pg too many connections", &pgconn.PgError{Code: "53300"}, false, kindUnavailable},
		{"pg undefined table", &pgconn.PgError{Code: "42P01"}, false, kindOther},
		{"pg wrapped", fmt.Errorf("ctx: %w", &pgconn.PgError{Code: "40P01"}), false, kindConflict},
		{"mysql duplicate", &mysql.MySQLError{Number: 1062}, false, kindUnique},
		{"mysql deadlock", &mysql.MySQLError{Number: 1213}, false, kindConflict},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, false, kindUnavailable},
		{"mariadb connection killed", &mysql.MySQLError{Number: 1927}, false, kindBroken},
		{"mysql packet too large", &mysql.MySQLError{Number: 1153}, false, kindTooLarge},
		{"mysql client packet too large", mysql.ErrPktTooLarge, false, kindTooLarge},
		{"mysql invalid connection", mysql.ErrInvalidConn, false, kindBroken},
		{"mysql syntax", &mysql.MySQLError{Number: 1064}, false, kindOther},
		{"sqlite unique", &liteErr{2067}, true, kindUnique},
		{"sqlite primary key", &liteErr{1555}, true, kindUnique},
		{"sqlite not null", &liteErr{1299}, true, kindOther},
		{"sqlite busy", &liteErr{5}, true, kindConflict},
		{"sqlite busy snapshot", &liteErr{517}, true, kindConflict},
		{"sqlite ioerr", &liteErr{10}, true, kindUnavailable},
		{"Code() of another driver", &liteErr{5}, false, kindOther},
		{"refused", refused, false, kindBroken},
		{"pg connect", &pgconn.ConnectError{}, false, kindBroken},
		{"bad conn", driver.ErrBadConn, false, kindBroken},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false, kindBroken},
		{"deadline", context.DeadlineExceeded, false, kindUnavailable},
		{"canceled", context.Canceled, false, kindOther},
		{"text only", errors.New("deadlock detected (SQLSTATE 40P01)"), false, kindOther},
	} {
		if got := classify(tc.err, tc.sqlite); got != tc.want {
			t.Errorf("%s: classify = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestWrapKeepsTheCause(t *testing.T) {
	l := &Layer{}
	cause := &pgconn.PgError{Code: "57P01"}
	err := l.wrap("reserve", cause)
	var pg *pgconn.PgError
	if !errors.Is(err, idem.ErrUnavailable) || !errors.As(err, &pg) || pg.Code != "57P01" {
		t.Fatalf("wrap = %v: want idem.ErrUnavailable with the driver's error inside", err)
	}
	if again := l.wrap("reserve", err); again != err {
		t.Fatalf("wrapping twice changed the error: %v", again)
	}
	if err := l.wrap("commit", &mysql.MySQLError{Number: 1213}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a deadlock: %v, want ErrConflict", err)
	}
	if err := l.wrap("get", context.Canceled); !errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("a cancellation: %v, want context.Canceled only", err)
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
