package sqllayer

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// stmts are the statements of one dialect over one set of table names.
// Arguments are numbered ?0, ?1… (bun's positional placeholders); for the
// drivers the layer calls directly they become $1, $2….
type stmts struct {
	insert       string // claim a free key: INSERT … ON CONFLICT DO NOTHING RETURNING (MySQL: a plain INSERT)
	atomicInsert string // insert inside an atomic execution's transaction; Postgres: with its lock timeout (?7)
	claimOrRead  string // Postgres: claim a free key or return the row that holds it, in one statement
	read         string // the record with the database's verdict on expiry and lease
	grace        string // compare-and-set on the old token that extends a lapsed lease by a grace
	takeover     string // compare-and-set on the old token that mints a new claim
	complete     string
	owned        string // state and result of the live record held by a token
	release      string
	live         string // whether a live record exists
	renew        string
	get          string
	markEvent    string
	eventExpired string // whether a processed-event row has expired
	reviveEvent  string // delete an expired processed-event row so that it can be inserted again
	advance      string
	version      string
	sweep        [2]string // janitor: records, events
	check        string    // Check: every table and column the layer uses, no row read
	probe        [3]string // Check, to name the culprit: records, events, versions alone
}

// names are the table names of a Layer.
type names struct {
	records, events, versions string
}

// tableName is an unquoted identifier, optionally schema-qualified. The table
// part leaves room for the "_expires_at_idx" suffix of its index within the
// 63 bytes Postgres allows.
var tableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func (n names) validate(sqlite bool) error {
	var errs []error
	for _, t := range []struct{ option, name string }{
		{"WithRecordsTable", n.records}, {"WithEventsTable", n.events}, {"WithVersionsTable", n.versions},
	} {
		switch {
		case !tableName.MatchString(t.name):
			errs = append(errs, fmt.Errorf("%s: give a name of letters, digits and underscores (at most 48), optionally after a schema and a dot (got %q)", t.option, t.name))
		case sqlite && strings.Contains(t.name, "."):
			errs = append(errs, fmt.Errorf("%s: give a name without a schema: SQLite tables are not schema-qualified here (got %q)", t.option, t.name))
		}
	}
	if n.records == n.events || n.records == n.versions || n.events == n.versions {
		errs = append(errs, fmt.Errorf("WithRecordsTable, WithEventsTable, WithVersionsTable: give the three tables three names (got %q, %q, %q)", n.records, n.events, n.versions))
	}
	return errors.Join(errs...)
}

// indexName is the name of a table's index with the given suffix: the table
// part of the name (an index lives in its table's schema) and the suffix.
func indexName(table, suffix string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	return table + suffix
}

// expand replaces the table placeholders R, E and V of a statement template.
func (n names) expand(s string) string {
	return strings.NewReplacer("{R}", n.records, "{E}", n.events, "{V}", n.versions).Replace(s)
}

func (s *stmts) each(f func(*string)) {
	for _, p := range []*string{&s.insert, &s.atomicInsert, &s.claimOrRead, &s.read, &s.grace, &s.takeover, &s.complete, &s.owned, &s.release,
		&s.live, &s.renew, &s.get, &s.markEvent, &s.eventExpired, &s.reviveEvent, &s.advance, &s.version, &s.sweep[0], &s.sweep[1],
		&s.check, &s.probe[0], &s.probe[1], &s.probe[2]} {
		f(p)
	}
}

// build expands the table names and, for a driver called directly, turns
// ?N into $N+1.
func (s stmts) build(n names, native bool) stmts {
	out := s
	out.check, out.probe = checkStmt, probeStmts
	out.each(func(p *string) {
		*p = n.expand(*p)
		if native {
			*p = dollars(*p)
		}
	})
	return out
}

// dollars rewrites bun's positional placeholders ?0, ?1… as $1, $2…, which
// Postgres drivers and modernc.org/sqlite bind by number. The statements hold
// no other question marks.
func dollars(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 8)
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		j := i + 1
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(q[i+1 : j])
		if err != nil {
			panic("sqllayer: bare ? in statement: " + q) // a bug in this package's SQL
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n + 1))
		i = j - 1
	}
	return b.String()
}
