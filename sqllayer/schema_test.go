package sqllayer_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

// shipped returns the statements of the shipped DDL for d with the default
// table names replaced by names, the way a user adapting the file would.
func shipped(t *testing.T, d dialect.Name, records, events, versions string) []string {
	t.Helper()
	ddl, err := sqllayer.DDL(d)
	if err != nil {
		t.Fatal(err)
	}
	ddl = strings.NewReplacer(
		sqllayer.DefaultRecordsTable, records,
		sqllayer.DefaultEventsTable, events,
		sqllayer.DefaultVersionsTable, versions,
	).Replace(ddl)
	var body strings.Builder
	for line := range strings.Lines(ddl) {
		if !strings.HasPrefix(line, "--") {
			body.WriteString(line)
		}
	}
	var out []string
	for _, s := range strings.Split(body.String(), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// tables are a test's own table names: records, events, versions.
type tables [3]string

// tableNames returns fresh table names, whose tables are dropped through db
// when the test ends (whoever creates them).
func tableNames(t *testing.T, db *bun.DB) tables {
	names := tables{testenv.Name("idem_rec"), testenv.Name("idem_evt"), testenv.Name("idem_ver")}
	t.Cleanup(func() {
		for _, n := range names {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+n)
		}
	})
	return names
}

func (n tables) opts() []sqllayer.Option {
	return []sqllayer.Option{
		sqllayer.WithRecordsTable(n[0]),
		sqllayer.WithEventsTable(n[1]),
		sqllayer.WithVersionsTable(n[2]),
	}
}

// recorder is a bun query hook that keeps every query it sees.
type recorder struct {
	mu      sync.Mutex
	queries []string
}

func (r *recorder) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (r *recorder) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, e.Query)
}

// TestInitRunsTheShippedDDL: the statements Init sends are those of the
// shipped migration file, table names aside.
func TestInitRunsTheShippedDDL(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		rec := &recorder{}
		db := s.Open(t).WithQueryHook(rec)
		names := tableNames(t, db)
		l := must.Get(sqllayer.New(db, names.opts()...))(t)
		if err := l.Init(ctx(t)); err != nil {
			t.Fatal(err)
		}
		var ran []string
		rec.mu.Lock()
		for _, q := range rec.queries {
			switch {
			case q == "BEGIN", q == "COMMIT", strings.HasPrefix(q, "SELECT pg_advisory_xact_lock("):
				// the transaction and the lock that serialize Init on Postgres
			default:
				ran = append(ran, q)
			}
		}
		rec.mu.Unlock()
		want := shipped(t, db.Dialect().Name(), names[0], names[1], names[2])
		if !reflect.DeepEqual(ran, want) {
			t.Fatalf("Init ran:\n%s\n\nthe shipped DDL is:\n%s", strings.Join(ran, ";\n"), strings.Join(want, ";\n"))
		}
		if !reflect.DeepEqual(l.Schema(), want) {
			t.Fatalf("Schema() differs from the shipped DDL")
		}
		// Init again: every statement is idempotent.
		if err := l.Init(ctx(t)); err != nil {
			t.Fatalf("second Init: %v", err)
		}
	})
}

// TestDefaultSchemaIsTheShippedFile: with default names, Schema is the file.
func TestDefaultSchemaIsTheShippedFile(t *testing.T) {
	l := must.Get(sqllayer.New(testenv.SQLiteMemory(t).Open(t)))(t)
	want := shipped(t, dialect.SQLite, sqllayer.DefaultRecordsTable, sqllayer.DefaultEventsTable, sqllayer.DefaultVersionsTable)
	if !reflect.DeepEqual(l.Schema(), want) {
		t.Fatalf("Schema() = %q, want %q", l.Schema(), want)
	}
	if _, err := sqllayer.DDL(dialect.MSSQL); err == nil {
		t.Fatal("DDL for MSSQL succeeded")
	}
}

// TestShippedDDLAppliedByHand: a schema applied from the file, as a user's
// migration tool would, is one the layer works on without Init.
func TestShippedDDLAppliedByHand(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		db := s.Open(t)
		names := tableNames(t, db)
		b := &backend{sql: s, opts: names.opts(), records: names[0], events: names[1], versions: names[2]}
		for _, stmt := range shipped(t, db.Dialect().Name(), b.records, b.events, b.versions) {
			if _, err := db.ExecContext(ctx(t), stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		l, _ := b.layer(t)
		k := idem.NewKey("hand", "made")
		rec, claimed, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
		if err != nil || !claimed {
			t.Fatal(claimed, err)
		}
		if err := l.Complete(ctx(t), k, rec.Token, []byte("ok"), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := l.Init(ctx(t)); err != nil {
			t.Fatalf("Init over the hand-made schema: %v", err)
		}
	})
}

// TestConcurrentInit: many instances starting at once all succeed.
func TestConcurrentInit(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		names := tableNames(t, s.Open(t))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		start := make(chan struct{})
		for range 8 {
			l := must.Get(sqllayer.New(s.Open(t), names.opts()...))(t)
			wg.Go(func() {
				<-start
				errs <- l.Init(ctx(t))
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent Init: %v", err)
			}
		}
	})
}

// TestInvalidConfiguration: a bad table name, a nil DB and options given
// nonsense are an error from New, which names each of them; no Layer
// exists to send a statement.
func TestInvalidConfiguration(t *testing.T) {
	db := testenv.SQLiteMemory(t).Open(t)
	for _, name := range []string{"", "1abc", "a-b", "a;drop", "schema.table", sqllayer.DefaultEventsTable} {
		l, err := sqllayer.New(db, sqllayer.WithRecordsTable(name))
		if !errors.Is(err, idem.ErrConfig) || l != nil {
			t.Errorf("New with records table %q: %v, want ErrConfig and no layer", name, err)
		}
	}
	_, err := sqllayer.New(nil,
		sqllayer.WithRetries(-1), sqllayer.WithBatchSize(-1),
		sqllayer.WithReserveOrder(sqllayer.OrderOneRoundTrip+1), sqllayer.WithEventRetention(0),
		sqllayer.WithVersionsTable("a b"),
	)
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("New with nonsense: %v, want ErrConfig", err)
	}
	// The package once, then each fault on a line of its own: the option
	// at fault and what to give instead.
	want := []string{"idem: configuration error: sqllayer: WithRetries: give ", "WithBatchSize: give ", "WithReserveOrder: give ",
		"WithEventRetention: give ", "New: give a *bun.DB", "WithVersionsTable: give "}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the error has %d lines, want %d: %v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d of the error is %q, want it to start %q", i, lines[i], w)
		}
	}
	l := must.Get(sqllayer.New(db))(t)
	k := idem.NewKey("", "k")
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"lease", func() error { _, _, err := l.Reserve(ctx(t), k, "fp", 0, time.Hour); return err }()},
		{"ttl", func() error { _, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, -1); return err }()},
		{"fingerprint", func() error {
			_, _, err := l.Reserve(ctx(t), k, strings.Repeat("f", 1025), time.Minute, time.Hour)
			return err
		}()},
		{"renew", l.Renew(ctx(t), k, "t", 0)},
		{"complete", l.Complete(ctx(t), k, "t", nil, 0)},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestMaxResult: a result over idem.MaxResult is refused with
// idem.ErrTooLarge and the claim stays the owner's; one of idem.MaxResult
// bytes is kept.
func TestMaxResult(t *testing.T) {
	b := setup(t, testenv.SQLiteMemory(t))
	l, _ := b.layer(t)
	k := idem.NewKey("", "max")
	rec, _, err := l.Reserve(ctx(t), k, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	over := make([]byte, idem.MaxResult+1)
	if err := l.Complete(ctx(t), k, rec.Token, over, time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over the limit: %v, want ErrTooLarge", err)
	}
	if err := l.Complete(ctx(t), k, rec.Token, over[:idem.MaxResult], time.Hour); err != nil {
		t.Fatalf("Complete at the limit: %v", err)
	}
}
