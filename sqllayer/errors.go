package sqllayer

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
)

// ErrConflict reports that the database aborted a transaction to resolve a
// deadlock or a serialization conflict (Postgres 40001 and 40P01, MySQL 1213,
// SQLite BUSY) and the layer's retries did not get through, or that the
// statement ran inside a caller's transaction, which only the caller can run
// again. Running the whole transaction again may succeed.
var ErrConflict = errors.New("sqllayer: transaction conflict, retry")

// kind is what the layer makes of a driver error.
type kind uint8

const (
	kindOther       kind = iota
	kindUnique           // a unique or primary key violation
	kindConflict         // deadlock or serialization failure: run again
	kindUnavailable      // the server did not answer in time or refused the work
	kindBroken           // the connection broke or could not be made: unavailable, but a new connection may work
	kindTooLarge         // a value or packet over the server's limit
)

// sqlState is met by the Postgres error types of pgx (*pgconn.PgError) and
// lib/pq.
type sqlState interface{ SQLState() string }

// sqliteCode is met by modernc.org/sqlite's *sqlite.Error. It is only asked
// of errors from a SQLite database, so that no other driver's Code method is
// mistaken for a SQLite result code.
type sqliteCode interface{ Code() int }

// classify sorts err by the codes drivers attach to it, never by its text.
func classify(err error, sqlite bool) kind {
	if err == nil {
		return kindOther
	}
	var st sqlState
	if errors.As(err, &st) {
		if k := pgKind(st.SQLState()); k != kindOther {
			return k
		}
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		if k := mysqlKind(my.Number); k != kindOther {
			return k
		}
	}
	if sqlite {
		var lite sqliteCode
		if errors.As(err, &lite) {
			if k := sqliteKind(lite.Code()); k != kindOther {
				return k
			}
		}
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.Is(err, mysql.ErrPktTooLarge):
		return kindTooLarge
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err),
		errors.As(err, &netErr) && netErr.Timeout():
		return kindUnavailable
	case errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return kindBroken
	}
	return kindOther
}

func pgKind(code string) kind {
	switch code {
	case "23505": // unique_violation
		return kindUnique
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return kindConflict
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return kindBroken
	case "57014", // query_canceled (statement_timeout, or a cancel on deadline)
		"55P03", // lock_not_available (lock_timeout)
		"40003", // statement_completion_unknown
		"25006": // read_only_sql_transaction (a standby after failover)
		return kindUnavailable
	case "54000": // program_limit_exceeded
		return kindTooLarge
	}
	if len(code) == 5 {
		switch code[:2] {
		case "08": // connection exception
			return kindBroken
		case "53", "58": // insufficient resources, system error
			return kindUnavailable
		}
	}
	return kindOther
}

func mysqlKind(n uint16) kind {
	switch n {
	case 1062, 1586: // ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME
		return kindUnique
	case 1213: // ER_LOCK_DEADLOCK
		return kindConflict
	case 1053, // ER_SERVER_SHUTDOWN
		1927: // ER_CONNECTION_KILLED (MariaDB)
		return kindBroken
	case 1205, // ER_LOCK_WAIT_TIMEOUT
		1040, // ER_CON_COUNT_ERROR
		1290, // ER_OPTION_PREVENTS_STATEMENT (read_only after failover)
		1317, // ER_QUERY_INTERRUPTED
		1969, // ER_STATEMENT_TIMEOUT (MariaDB)
		3024: // ER_QUERY_TIMEOUT (MySQL)
		return kindUnavailable
	case 1153, 1301: // ER_NET_PACKET_TOO_LARGE, ER_WARN_ALLOWED_PACKET_OVERFLOWED
		return kindTooLarge
	}
	return kindOther
}

func sqliteKind(code int) kind {
	switch code & 0xff {
	case 19: // SQLITE_CONSTRAINT
		switch code {
		case 1555, 2067: // SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
			return kindUnique
		}
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return kindConflict
	case 10, 13, 14: // SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN: a local disk, no new connection helps
		return kindUnavailable
	case 18: // SQLITE_TOOBIG
		return kindTooLarge
	}
	return kindOther
}

// wrap translates err, from the operation op, into the error callers see:
// idem.ErrUnavailable, ErrConflict or idem.ErrTooLarge where the driver's
// code says so, with the driver's error kept for errors.As and logs. A
// caller's cancellation stays what it is.
func (l *Layer) wrap(op string, err error) error {
	if err == nil || errors.Is(err, idem.ErrUnavailable) || errors.Is(err, ErrConflict) ||
		errors.Is(err, idem.ErrTooLarge) || errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrInvalidKey) {
		return err
	}
	switch classify(err, l.sqlite) {
	case kindUnavailable, kindBroken:
		return fmt.Errorf("%w: sqllayer: %s: %w", idem.ErrUnavailable, op, err)
	case kindConflict:
		return fmt.Errorf("%w: %s: %w", ErrConflict, op, err)
	case kindTooLarge:
		return fmt.Errorf("%w: sqllayer: %s: %w", idem.ErrTooLarge, op, err)
	}
	return fmt.Errorf("sqllayer: %s: %w", op, err)
}
