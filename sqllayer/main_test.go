package sqllayer_test

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/sqllayer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is one SQL backend with this test's own tables, created by Init
// and dropped when the test ends.
type backend struct {
	sql  *testenv.SQL
	opts []sqllayer.Option
	// records, events and versions are the test's table names.
	records, events, versions string
	// conns caps each server pool that layer opens; 0 means 8.
	conns int
}

// setup creates fresh tables on s for t and returns the backend.
func setup(t *testing.T, s *testenv.SQL) *backend {
	t.Helper()
	b := &backend{
		sql:      s,
		records:  testenv.Name("idem_rec"),
		events:   testenv.Name("idem_evt"),
		versions: testenv.Name("idem_ver"),
	}
	b.opts = []sqllayer.Option{
		sqllayer.WithRecordsTable(b.records),
		sqllayer.WithEventsTable(b.events),
		sqllayer.WithVersionsTable(b.versions),
	}
	db := s.Open(t)
	t.Cleanup(func() {
		// Runs before the pool closes: cleanups run last-registered first.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range []string{b.records, b.events, b.versions} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
	if err := must.Get(sqllayer.New(db, b.opts...))(t).Init(ctx(t)); err != nil {
		t.Fatalf("Init on %s: %v", s.Kind, err)
	}
	return b
}

// layer returns a Layer over a pool of its own (in-memory SQLite: the one
// pool), as a separate service instance would have.
func (b *backend) layer(t *testing.T, opts ...sqllayer.Option) (*sqllayer.Layer, *bun.DB) {
	t.Helper()
	db := b.sql.Open(t)
	if b.sql.Real {
		// The servers are shared with other packages' tests: stay well under
		// their connection limits.
		db.SetMaxOpenConns(cmp.Or(b.conns, 8))
	}
	return must.Get(sqllayer.New(db, append(append([]sqllayer.Option(nil), b.opts...), opts...)...))(t), db
}

// orderName names o in a subtest's name, the layer's own order included.
func orderName(o idem.ReserveOrder) string {
	if o == sqllayer.OrderOneRoundTrip {
		return "one-round-trip"
	}
	return o.String()
}

// ctx returns a context bounded well inside the test timeout.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// count returns the number of rows in table matching where.
func count(t testing.TB, db bun.IDB, table, where string, args ...any) int {
	t.Helper()
	var n int
	q := fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", table, where)
	if err := db.NewRaw(q, args...).Scan(ctx(t), &n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// allSQLAtOnce runs fn as a subtest for every SQL backend, as
// testenv.AllSQL does, but all at once, each in its own goroutine: for tests
// that mostly wait out leases, which -parallel would run two at a time.
func allSQLAtOnce(t *testing.T, fn func(t *testing.T, s *testenv.SQL)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, b := range []struct {
		name string
		open func(testing.TB) *testenv.SQL
	}{
		{"postgres", testenv.Postgres},
		{"mysql", testenv.MySQL},
		{"sqlite-file", testenv.SQLiteFile},
		{"sqlite-memory", testenv.SQLiteMemory},
	} {
		wg.Go(func() { t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) }) })
	}
	wg.Wait()
}
