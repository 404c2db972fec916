package testenv

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

// WithApplicationName returns a copy of the Postgres backend s whose pools
// connect with application_name app, so that a test can find their backends
// in pg_stat_activity and act on them (see TerminatePostgres).
func WithApplicationName(t testing.TB, s *SQL, app string) *SQL {
	t.Helper()
	if s.Kind != "postgres" {
		t.Fatalf("testenv: application_name is a Postgres setting, not %s", s.Kind)
	}
	dsn := s.DSN
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		dsn = u.String()
	} else {
		dsn = strings.TrimSpace(dsn) + " application_name=" + app
	}
	return &SQL{Kind: s.Kind, DSN: dsn, Real: s.Real}
}

// WaitPostgresLockWait polls pg_stat_activity through admin until a backend
// with application_name app is waiting for a lock, and fails the test after
// timeout.
func WaitPostgresLockWait(t testing.TB, admin *bun.DB, app string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var n int
		err := admin.NewRaw("SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'", app).Scan(ctx, &n)
		if err == nil && n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: no backend of %q waited for a lock within %v (last error %v)", app, timeout, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TerminatePostgres ends, through admin, every backend whose
// application_name is app, as an administrator or a failover would, and
// returns how many it ended.
func TerminatePostgres(t testing.TB, admin *bun.DB, app string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := admin.NewRaw("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid()", app).Scan(ctx, &n); err != nil {
		t.Fatalf("testenv: terminate %q: %v", app, err)
	}
	return n
}
