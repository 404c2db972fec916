package sqllayer

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// The columns of each table that the layer's statements use.
const (
	recordColumns  = "key_digest, scope, client_key, fingerprint, state, token, result, lease_until, created_at, expires_at"
	eventColumns   = "consumer, event_id, created_at, expires_at"
	versionColumns = "source, external_id, version, updated_at"
)

// The statements of Check: SELECTs of every column the layer uses, under a
// condition that is false, so the database resolves the tables, the columns
// and the privilege to read them, and reads no row. checkStmt asks about the
// three tables in one statement; probeStmts ask about one table each.
var (
	probeStmts = [3]string{
		"SELECT " + recordColumns + " FROM {R} WHERE 1 = 0",
		"SELECT " + eventColumns + " FROM {E} WHERE 1 = 0",
		"SELECT " + versionColumns + " FROM {V} WHERE 1 = 0",
	}
	checkStmt = "SELECT 1 FROM (" + probeStmts[0] + ") AS r, (" + probeStmts[1] + ") AS e, (" + probeStmts[2] + ") AS v"
)

// Check tells whether the layer can decide: it asks the database, in one
// statement that reads no row (one round trip), whether it answers and has
// the three tables Init creates with every column the layer uses. It is
// meant for readiness probes; it writes nothing, takes no lock a writer
// waits for, and may run as often as a probe does.
//
// It returns nil when the layer can work; an error wrapping idem.ErrConfig
// for a mistake in the setup, which only a change of the setup mends (a
// table or column missing — Init not run, or a table from another version
// —, a database that does not exist, credentials the server refused, a
// privilege missing), with
// advice on what to change; and an error wrapping idem.ErrUnavailable when
// the database cannot be reached or does not answer in time, or fails in a
// way the layer does not know. A broken connection is retried as the
// layer's own statements are (WithRetries). The caller's cancellation
// comes back as it is.
//
// Check proves that the layer's user can read the tables; it does not try
// to write them, so a user that lacks INSERT, UPDATE or DELETE passes Check
// and gets idem.ErrConfig from the first write.
func (l *Layer) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := l.retry(ctx, func() error { return l.probe(ctx, l.st.check) })
	if err == nil {
		return nil
	}
	tables := []string{l.names.records, l.names.events, l.names.versions}
	if k, m := diagnose(err, l.dialect); k == kindConfig && m != unknownDatabase && m != badCredentials && m != deniedDatabase && m != untrustedServer {
		// A mistake about one of the tables: name the one at fault.
		for i, table := range tables {
			if perr := l.probe(ctx, l.st.probe[i]); perr != nil && classify(perr, l.dialect) == kindConfig {
				err, tables = perr, []string{table}
				break
			}
		}
	}
	werr := l.wrapOn("check", tables, err)
	if errors.Is(werr, idem.ErrConfig) || errors.Is(werr, idem.ErrUnavailable) || ctx.Err() != nil {
		return werr
	}
	// A failure the layer does not know keeps it from deciding as surely as
	// an outage does.
	return fmt.Errorf("%w: %w", idem.ErrUnavailable, werr)
}

// probe runs the query q of Check and reads its answer, which has no row.
func (l *Layer) probe(ctx context.Context, q string) error {
	rows, err := l.pool().query(ctx, q)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return err
	}
	return rows.Close()
}
