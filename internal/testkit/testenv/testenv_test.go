package testenv_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBackends says which services this machine offers the tests; make test
// runs it verbosely so that every run records what it ran against.
func TestBackends(t *testing.T) {
	if o, err := testenv.RedisOptions(); err == nil {
		t.Logf("redis:    real server at %s", o.Addr)
	} else {
		t.Logf("redis:    none (%v): tests use miniredis", err)
	}
	if _, err := testenv.PostgresDSN(); err == nil {
		t.Logf("postgres: real server")
	} else {
		t.Logf("postgres: none (%v): tests use sqlite", err)
	}
	if _, err := testenv.MySQLDSN(); err == nil {
		t.Logf("mysql:    real server")
	} else {
		t.Logf("mysql:    none (%v): its tests skip", err)
	}
	t.Logf("required: %v (%s)", testenv.Required(), testenv.EnvRequire)
}

func TestAnyRedisAnswers(t *testing.T) {
	r := testenv.AnyRedis(t)
	c := r.Client(t)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("%s: %v", r.Kind(), err)
	}
}

func TestAllSQLAnswer(t *testing.T) {
	testenv.AllSQL(t, func(t *testing.T, s *testenv.SQL) {
		db := s.Open(t)
		var n int
		if err := db.NewSelect().ColumnExpr("1").Scan(t.Context(), &n); err != nil || n != 1 {
			t.Fatalf("%s: SELECT 1 = %d, %v", s.Kind, n, err)
		}
	})
}

func TestNamesAreUnique(t *testing.T) {
	a, b := testenv.Name("t"), testenv.Name("t")
	if a == b || !strings.HasPrefix(a, "t_") || strings.ToLower(a) != a {
		t.Fatalf("Name gave %q and %q", a, b)
	}
	if p, q := testenv.Prefix(), testenv.Prefix(); p == q {
		t.Fatal("Prefix repeated")
	}
}
