package sqllayer

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

//go:embed ddl/*.sql
var ddlFiles embed.FS

// DDL returns the schema migration for a dialect (dialect.PG, dialect.MySQL
// or dialect.SQLite) with the default table names: the file Init runs, for
// users who apply their own migrations. Every statement is idempotent (IF NOT
// EXISTS). With other table names, use Layer.Schema.
func DDL(d dialect.Name) (string, error) {
	file, ok := map[dialect.Name]string{
		dialect.PG:     "ddl/postgres.sql",
		dialect.MySQL:  "ddl/mysql.sql",
		dialect.SQLite: "ddl/sqlite.sql",
	}[d]
	if !ok {
		return "", fmt.Errorf("sqllayer: no schema for dialect %s", d)
	}
	b, err := ddlFiles.ReadFile(file)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// defaultTable matches the default table names in the shipped DDL, with the
// suffix of an index named after its table.
var defaultTable = regexp.MustCompile(`\b(` + DefaultRecordsTable + `|` + DefaultEventsTable + `|` + DefaultVersionsTable + `)(_expires_at_idx)?\b`)

// splitDDL returns the statements of a DDL file: comment lines dropped, split
// at semicolons, blank statements skipped.
func splitDDL(ddl string) []string {
	var b strings.Builder
	for line := range strings.Lines(ddl) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	var out []string
	for s := range strings.SplitSeq(b.String(), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// schema renders the shipped DDL of dialect d for the table names n.
func schema(d dialect.Name, n names) ([]string, error) {
	ddl, err := DDL(d)
	if err != nil {
		return nil, err
	}
	rename := map[string]string{
		DefaultRecordsTable:  n.records,
		DefaultEventsTable:   n.events,
		DefaultVersionsTable: n.versions,
	}
	stmts := splitDDL(ddl)
	for i, s := range stmts {
		stmts[i] = defaultTable.ReplaceAllStringFunc(s, func(m string) string {
			sub := defaultTable.FindStringSubmatch(m)
			if sub[2] != "" {
				return indexName(rename[sub[1]], sub[2])
			}
			return rename[sub[1]]
		})
	}
	return stmts, nil
}

// Schema returns the statements Init runs, in order, for the layer's dialect
// and table names: the shipped DDL (see DDL) with the names replaced.
func (l *Layer) Schema() []string { return append([]string(nil), l.schema...) }

// Init creates the layer's tables and indexes if they are missing. It is safe
// to run from many instances at once: on Postgres the statements run in one
// transaction under an advisory lock named after the records table (CREATE
// TABLE IF NOT EXISTS alone can still fail with a unique violation on
// pg_type when two sessions race), and a race with a migration run by other
// means is retried. On MySQL each CREATE TABLE carries its indexes, so every
// statement is atomic on its own.
func (l *Layer) Init(ctx context.Context) error {
	return l.wrap("init", l.apply(ctx, "sqllayer:init:"+l.names.records, l.schema))
}

// apply runs the idempotent statements stmts as Init does: on Postgres in
// one transaction under the advisory lock named lock, and again after a
// race with a concurrent creation of the same objects.
func (l *Layer) apply(ctx context.Context, lock string, stmts []string) error {
	var err error
	for attempt := 0; attempt <= l.retries+1; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				break
			}
		}
		if l.dialect == dialect.PG {
			err = l.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext(?))", lock); err != nil {
					return err
				}
				return execAll(ctx, tx, stmts)
			})
		} else {
			err = execAll(ctx, l.db, stmts)
		}
		if err == nil || !raced(err, l.dialect) {
			break
		}
	}
	return err
}

func execAll(ctx context.Context, db bun.IConn, stmts []string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// raced reports an error that a concurrent creation of the same objects can
// cause and that running Init again resolves.
func raced(err error, d dialect.Name) bool {
	var st sqlState
	if errors.As(err, &st) {
		switch st.SQLState() {
		case "42P07", "42710": // duplicate_table, duplicate_object
			return true
		}
	}
	k := classify(err, d)
	return k == kindUnique || k == kindConflict
}
