package sqllayer

import (
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"

	"github.com/uptrace/bun/dialect"
)

// The layer reads driver errors through what the drivers' own types expose,
// without importing any driver, so that a program links only the driver it
// uses:
//
//   - Postgres: the SQLState method of pgx's *pgconn.PgError and lib/pq's
//     *pq.Error;
//   - MySQL: go-sql-driver/mysql's *MySQLError has no method to ask, only
//     the exported fields Number uint16, SQLState [5]byte and Message
//     string, so the layer recognises an error in the chain that is a
//     pointer to a struct with exactly those three fields (by reflection)
//     and reads Number; the driver's two client-side errors that matter,
//     ErrInvalidConn and ErrPktTooLarge, are plain errors.New values, which
//     only their text tells apart (see mysqlClientKind);
//   - SQLite: the Code method of modernc.org/sqlite's *sqlite.Error, asked
//     only of errors from a SQLite layer so that no other Code method is
//     taken for a SQLite result code. SQLite gives a missing table and a
//     missing column the generic code 1 (SQLITE_ERROR), so for that code
//     alone the message tells (see sqliteKind);
//   - and, for every driver, the standard library's vocabulary: context
//     errors, net.Error, a Timeout() bool or SafeToRetry() bool method
//     (pgx's errors have both), driver.ErrBadConn, io.ErrUnexpectedEOF.
type (
	sqlState    interface{ SQLState() string }
	sqliteCode  interface{ Code() int }
	timeout     interface{ Timeout() bool }
	safeToRetry interface{ SafeToRetry() bool }
)

// classify sorts err, an error of dialect d's driver, by kind.
func classify(err error, d dialect.Name) kind {
	k, _ := diagnose(err, d)
	return k
}

// diagnose sorts err by the codes its driver attached to it, and names the
// setup mistake of a kindConfig error.
func diagnose(err error, d dialect.Name) (kind, mistake) {
	if err == nil {
		return kindOther, noMistake
	}
	var st sqlState
	if errors.As(err, &st) {
		if k, m := pgKind(st.SQLState()); k != kindOther {
			return k, m
		}
	}
	switch d {
	case dialect.MySQL:
		if n, ok := mysqlNumber(err); ok {
			if k, m := mysqlKind(n); k != kindOther {
				return k, m
			}
		}
		if k := mysqlClientKind(err); k != kindOther {
			return k, noMistake
		}
	case dialect.SQLite:
		var lite sqliteCode
		if errors.As(err, &lite) {
			if k, m := sqliteKind(lite.Code(), err.Error()); k != kindOther {
				return k, m
			}
		}
	}
	var cert *tls.CertificateVerificationError
	switch {
	case errors.As(err, &cert):
		return kindConfig, untrustedServer
	case errors.Is(err, context.Canceled):
		return kindOther, noMistake // the caller's, not the server's
	case errors.Is(err, context.DeadlineExceeded), inChain(err, func(e error) bool {
		t, ok := e.(timeout)
		return ok && t.Timeout()
	}):
		return kindUnavailable, noMistake
	case inChain(err, func(e error) bool {
		// pgx: the error happened before anything reached the server
		// (a connection closed meanwhile, a write that failed): a new
		// connection may work.
		r, ok := e.(safeToRetry)
		return ok && r.SafeToRetry()
	}):
		return kindBroken, noMistake
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return kindBroken, noMistake
	}
	return kindOther, noMistake
}

// inChain reports whether f holds for err or an error it wraps, walking the
// chain as errors.As does.
func inChain(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

func pgKind(code string) (kind, mistake) {
	switch code {
	case "23505": // unique_violation
		return kindUnique, noMistake
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return kindConflict, noMistake
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return kindBroken, noMistake
	case "57014", // query_canceled (statement_timeout, or a cancel on deadline)
		"55P03", // lock_not_available (lock_timeout)
		"40003", // statement_completion_unknown
		"25006": // read_only_sql_transaction (a standby after failover)
		return kindUnavailable, noMistake
	case "54000": // program_limit_exceeded
		return kindTooLarge, noMistake
	case "42P01": // undefined_table
		return kindConfig, missingTable
	case "42703": // undefined_column
		return kindConfig, missingColumn
	case "3F000": // invalid_schema_name
		return kindConfig, missingSchema
	case "3D000": // invalid_catalog_name
		return kindConfig, unknownDatabase
	case "28P01", "28000": // invalid_password, invalid_authorization_specification (no such role, pg_hba)
		return kindConfig, badCredentials
	case "42501": // insufficient_privilege
		return kindConfig, noPrivilege
	case "25P02": // in_failed_sql_transaction
		return kindConfig, abortedTx
	}
	if len(code) == 5 {
		switch code[:2] {
		case "08": // connection exception
			return kindBroken, noMistake
		case "53", "58": // insufficient resources, system error
			return kindUnavailable, noMistake
		}
	}
	return kindOther, noMistake
}

func mysqlKind(n uint16) (kind, mistake) {
	switch n {
	case 1062, 1586: // ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME
		return kindUnique, noMistake
	case 1213: // ER_LOCK_DEADLOCK
		return kindConflict, noMistake
	case 1053, // ER_SERVER_SHUTDOWN
		1927: // ER_CONNECTION_KILLED (MariaDB)
		return kindBroken, noMistake
	case 1205, // ER_LOCK_WAIT_TIMEOUT
		1040, // ER_CON_COUNT_ERROR
		1047, // ER_UNKNOWN_COM_ERROR: a Galera node out of the primary component, or not yet synced
		1180, // ER_ERROR_DURING_COMMIT: a Galera node that could not replicate the commit
		1290, // ER_OPTION_PREVENTS_STATEMENT (read_only after failover)
		1317, // ER_QUERY_INTERRUPTED
		1969, // ER_STATEMENT_TIMEOUT (MariaDB)
		3024: // ER_QUERY_TIMEOUT (MySQL)
		return kindUnavailable, noMistake
	case 1153, 1301: // ER_NET_PACKET_TOO_LARGE, ER_WARN_ALLOWED_PACKET_OVERFLOWED
		return kindTooLarge, noMistake
	case 1146: // ER_NO_SUCH_TABLE
		return kindConfig, missingTable
	case 1054: // ER_BAD_FIELD_ERROR (unknown column)
		return kindConfig, missingColumn
	case 1049: // ER_BAD_DB_ERROR
		return kindConfig, unknownDatabase
	case 1045, // ER_ACCESS_DENIED_ERROR
		1698: // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
		return kindConfig, badCredentials
	case 1044: // ER_DBACCESS_DENIED_ERROR
		return kindConfig, deniedDatabase
	case 1142, 1143, 1227: // ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR
		return kindConfig, noPrivilege
	}
	return kindOther, noMistake
}

// mysqlNumber returns the server error number of go-sql-driver/mysql's
// *MySQLError in err's chain. Not importing the driver, it recognises the
// type by its exported fields, the driver's documented API: a pointer to a
// struct whose fields are exactly Number uint16, SQLState [5]byte and
// Message string. An error of any other shape is not read; should the
// driver ever change the type, its errors become unclassified (kindOther),
// never misread.
func mysqlNumber(err error) (n uint16, ok bool) {
	inChain(err, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() || !mysqlErrorShape(v.Type().Elem()) {
			return false
		}
		n, ok = uint16(v.Elem().Field(0).Uint()), true
		return true
	})
	return n, ok
}

func mysqlErrorShape(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() != 3 {
		return false
	}
	number, state, message := t.Field(0), t.Field(1), t.Field(2)
	return number.Name == "Number" && number.Type.Kind() == reflect.Uint16 &&
		state.Name == "SQLState" && state.Type.Kind() == reflect.Array && state.Type.Len() == 5 && state.Type.Elem().Kind() == reflect.Uint8 &&
		message.Name == "Message" && message.Type.Kind() == reflect.String
}

// plainError is the type of errors.New's values.
var plainError = reflect.TypeOf(errors.New(""))

// mysqlClientKind recognises two errors go-sql-driver/mysql raises itself,
// which reach the layer as they are: ErrInvalidConn ("invalid connection"),
// what a statement gets when its connection breaks while it waits for the
// answer (the server killed or restarted it, a proxy cut it; a connection
// found dead before use gives driver.ErrBadConn instead), and ErrPktTooLarge,
// a statement over the DSN's maxAllowedPacket. Both are errors.New values,
// and without importing the driver only their text identifies them: the
// layer asks this only of a MySQL layer's errors, only of a plain errors.New
// value, and compares the driver's exact wording. A wrong match would cost
// a retry of a statement that is safe to run again, and idem.ErrUnavailable
// or idem.ErrTooLarge instead of a plain error: the layer still fails
// closed.
func mysqlClientKind(err error) kind {
	k := kindOther
	inChain(err, func(e error) bool {
		if reflect.TypeOf(e) != plainError {
			return false
		}
		switch msg := e.Error(); {
		case msg == "invalid connection":
			k = kindBroken
		case strings.HasPrefix(msg, "packet for query is too large"):
			k = kindTooLarge
		default:
			return false
		}
		return true
	})
	return k
}

func sqliteKind(code int, msg string) (kind, mistake) {
	switch code & 0xff {
	case 1: // SQLITE_ERROR
		// SQLite has no code of its own for a missing table or column:
		// its message, fixed in SQLite's source for decades, is all that
		// tells them from a syntax error.
		switch {
		case strings.Contains(msg, "no such table"):
			return kindConfig, missingTable
		case strings.Contains(msg, "no such column"), strings.Contains(msg, "has no column named"):
			return kindConfig, missingColumn
		}
	case 19: // SQLITE_CONSTRAINT
		switch code {
		case 1555, 2067: // SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
			return kindUnique, noMistake
		}
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return kindConflict, noMistake
	case 10, 13, 14: // SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN: a local disk, no new connection helps
		return kindUnavailable, noMistake
	case 18: // SQLITE_TOOBIG
		return kindTooLarge, noMistake
	}
	return kindOther, noMistake
}
