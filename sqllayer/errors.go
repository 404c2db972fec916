package sqllayer

import (
	"errors"
	"fmt"
	"strings"

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
	kindConfig           // a mistake in setting the layer up, which no retry fixes (see mistake)
)

// mistake is the setup mistake behind a kindConfig error; it chooses the
// advice of the error the caller sees.
type mistake uint8

const (
	noMistake       mistake = iota
	missingTable            // the table does not exist: Init was not run
	missingColumn           // the table lacks a column: a schema of another version
	missingSchema           // the schema of a qualified table name does not exist
	unknownDatabase         // the database named in the DSN does not exist
	badCredentials          // the server refused the user or the password
	deniedDatabase          // MySQL: the user may not use the database (or it does not exist)
	noPrivilege             // the user lacks a privilege on a table
	untrustedServer         // the server's TLS certificate failed verification
	abortedTx               // the caller's transaction is aborted (Postgres: a statement in it failed)
)

// wrap translates err, from the operation op, into the error callers see:
// idem.ErrUnavailable, ErrConflict, idem.ErrTooLarge or idem.ErrConfig
// where the driver's code says so, with the driver's error kept for
// errors.As and logs. A caller's cancellation stays what it is.
func (l *Layer) wrap(op string, err error) error {
	return l.wrapOn(op, l.opTables(op), err)
}

// wrapOn is wrap for an operation on the given tables, which the advice of
// a configuration error names.
func (l *Layer) wrapOn(op string, tables []string, err error) error {
	if err == nil || errors.Is(err, idem.ErrUnavailable) || errors.Is(err, ErrConflict) || errors.Is(err, idem.ErrConfig) || errors.Is(err, idem.ErrInFlight) ||
		errors.Is(err, idem.ErrTooLarge) || errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrInvalidKey) {
		return err
	}
	switch k, m := diagnose(err, l.dialect); k {
	case kindUnavailable, kindBroken:
		return fmt.Errorf("%w: sqllayer: %s: %w", idem.ErrUnavailable, op, err)
	case kindConflict:
		return fmt.Errorf("%w: %s: %w", ErrConflict, op, err)
	case kindTooLarge:
		return fmt.Errorf("%w: sqllayer: %s: %w", idem.ErrTooLarge, op, err)
	case kindConfig:
		return fmt.Errorf("%w: sqllayer: %s: %s: %w", idem.ErrConfig, op, l.advice(m, tables), err)
	}
	return fmt.Errorf("sqllayer: %s: %w", op, err)
}

// opTables returns the tables the operation op works on.
func (l *Layer) opTables(op string) []string {
	switch op {
	case "reserve", "complete", "release", "renew", "get":
		return []string{l.names.records}
	case "mark processed":
		return []string{l.names.events}
	case "advance version", "version":
		return []string{l.names.versions}
	case "delete expired":
		return []string{l.names.records, l.names.events}
	}
	return []string{l.names.records, l.names.events, l.names.versions}
}

// advice says what to do about the mistake m, on the tables named.
func (l *Layer) advice(m mistake, tables []string) string {
	which := quoted(tables)
	switch m {
	case missingTable:
		return fmt.Sprintf("table %s does not exist: run Layer.Init, or apply sqllayer.DDL in your migrations", which)
	case missingColumn:
		return fmt.Sprintf("table %s lacks a column this version of sqllayer uses (a table from another version?): "+
			"compare it with Layer.Schema and migrate it; Init does not change existing tables", which)
	case missingSchema:
		return fmt.Sprintf("the schema of table %s does not exist: create it, then run Layer.Init or apply sqllayer.DDL", which)
	case unknownDatabase:
		return "the database named in the DSN does not exist: create it, or correct the DSN"
	case badCredentials:
		return "authentication failed for the DSN's user: check the DSN's credentials"
	case deniedDatabase:
		return "the DSN's user may not use the database the DSN names, or it does not exist: grant the user access, or correct the DSN"
	case noPrivilege:
		return fmt.Sprintf("the DSN's user lacks a privilege on table %s: grant it SELECT, INSERT, UPDATE and DELETE on the layer's tables (and CREATE for Init)", which)
	case untrustedServer:
		return "the server's TLS certificate failed verification: check the DSN's TLS settings (CA, server name)"
	case abortedTx:
		return "the transaction is aborted (a statement in it failed): roll it back; run a statement that may fail, such as an insert that may hit a unique key, under sqllayer.Savepoint"
	}
	return "a mistake in the setup"
}

// quoted names tables as "a", "a" or "b", "a", "b" or "c".
func quoted(tables []string) string {
	q := make([]string, len(tables))
	for i, t := range tables {
		q[i] = fmt.Sprintf("%q", t)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
