package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is the tiers of one test's service: its own tables on one SQL
// backend and its own prefix on the real Redis, with the layers a service
// instance would have, and the flags that point the command at them.
type service struct {
	sql   *sqllayer.Layer
	redis *redislayer.Layer
	flags []string
	audit string
	// What another instance of the service opens its own tiers with.
	sqlEnv   *testenv.SQL
	redisEnv *testenv.Redis
	sqlOpts  []sqllayer.Option
	prefix   string
}

func newService(t *testing.T, s *testenv.SQL) *service {
	t.Helper()
	records, events, versions, audit := testenv.Name("idem_rec"), testenv.Name("idem_evt"), testenv.Name("idem_ver"), testenv.Name("idem_aud")
	db := s.Open(t)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range []string{records, events, versions, audit} {
			if _, err := db.ExecContext(c, "DROP TABLE IF EXISTS "+name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
	opts := []sqllayer.Option{sqllayer.WithRecordsTable(records), sqllayer.WithEventsTable(events),
		sqllayer.WithVersionsTable(versions), sqllayer.WithAuditTable(audit)}
	l := must.Get(sqllayer.New(db, opts...))(t)
	if err := l.Init(testCtx(t)); err != nil {
		t.Fatalf("Init: %v", err)
	}
	r := testenv.RealRedis(t)
	prefix := testenv.Prefix()
	rl := must.Get(redislayer.New(r.Client(t), redislayer.WithPrefix(prefix)))(t)
	t.Cleanup(func() { _ = rl.Close() })
	dbFlag := map[string]string{"postgres": "--postgres", "mysql": "--mysql", "sqlite-file": "--sqlite"}[s.Kind]
	if dbFlag == "" {
		t.Fatalf("no flag for SQL backend %s", s.Kind)
	}
	return &service{sql: l, redis: rl, audit: audit, sqlEnv: s, redisEnv: r, sqlOpts: opts, prefix: prefix, flags: []string{
		dbFlag, s.DSN, "--redis", redisURL(r), "--redis-prefix", prefix,
		"--records-table", records, "--events-table", events, "--versions-table", versions, "--audit-table", audit,
	}}
}

// instance returns the layers of another instance of the service: a pool
// and a client of its own over the same tables and prefix.
func (svc *service) instance(t *testing.T) (*sqllayer.Layer, *redislayer.Layer) {
	t.Helper()
	l := must.Get(sqllayer.New(svc.sqlEnv.Open(t), svc.sqlOpts...))(t)
	rl := must.Get(redislayer.New(svc.redisEnv.Client(t), redislayer.WithPrefix(svc.prefix)))(t)
	t.Cleanup(func() { _ = rl.Close() })
	return l, rl
}

// redisURL is the URL of the real Redis r, for the command's --redis.
func redisURL(r *testenv.Redis) string {
	u := url.URL{Scheme: "redis", Host: r.Options.Addr, Path: fmt.Sprint("/", r.Options.DB)}
	if r.Options.Password != "" {
		u.User = url.UserPassword(r.Options.Username, r.Options.Password)
	}
	return u.String()
}

// eachBackend runs fn for Postgres, MariaDB and SQLite in a file (the
// command opens its own pool: an in-memory database would be another).
func eachBackend(t *testing.T, fn func(t *testing.T, svc *service)) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *testenv.SQL
	}{{"postgres", testenv.Postgres}, {"mysql", testenv.MySQL}, {"sqlite-file", testenv.SQLiteFile}} {
		t.Run(b.name, func(t *testing.T) { fn(t, newService(t, b.open(t))) })
	}
}

// out is what one run of the command printed and returned.
type out struct {
	code           int
	stdout, stderr string
}

// idem runs the command in-process with the service's flags after the
// command's name, as the OS user "tester", with stdin.
func (svc *service) idem(t *testing.T, stdin string, args ...string) out {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{args[0]}, svc.flags...)
	full = append(full, args[1:]...)
	code := run(testCtx(t), full, env{getenv: func(string) string { return "" }, stdin: strings.NewReader(stdin),
		stdout: &stdout, stderr: &stderr, user: "tester"})
	return out{code, stdout.String(), stderr.String()}
}

// jsonOf decodes the command's JSON output.
func jsonOf[T any](t *testing.T, o out) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(o.stdout), &v); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\nstderr:\n%s", err, o.stdout, o.stderr)
	}
	return v
}

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}
