package testenv

import (
	"net/url"
	"testing"

	"github.com/idemkit/idem/internal/testkit/faultproxy"
)

// PostgresViaProxy returns the real Postgres reached through a fault proxy
// of this test's own (closed when the test ends), so the test can refuse,
// reset or black-hole its connections. It skips, or fails under
// IDEM_REQUIRE_SERVICES=1, when there is no real Postgres.
func PostgresViaProxy(t testing.TB) (*SQL, *faultproxy.Proxy) {
	t.Helper()
	pg := Postgres(t)
	u, err := url.Parse(pg.DSN)
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatalf("fault proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return &SQL{Kind: pg.Kind, DSN: u.String(), Real: true}, p
}
