package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by this package.
const (
	EnvRedis    = "IDEM_REDIS_URL"        // e.g. redis://127.0.0.1:6379/0
	EnvPostgres = "IDEM_POSTGRES_DSN"     // e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable
	EnvMySQL    = "IDEM_MYSQL_DSN"        // e.g. root@tcp(127.0.0.1:3306)/test?parseTime=true
	EnvRequire  = "IDEM_REQUIRE_SERVICES" // "1": a missing real service is a failure
)

// Default addresses probed when no environment variable is set.
const (
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC"
)

const probeTimeout = 300 * time.Millisecond

// Required reports whether IDEM_REQUIRE_SERVICES asks for real services.
func Required() bool {
	v := os.Getenv(EnvRequire)
	return v == "1" || strings.EqualFold(v, "true")
}

// missing handles an unavailable real service: a failure under
// IDEM_REQUIRE_SERVICES, a skip otherwise.
func missing(t testing.TB, service, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required (%s=1) but unavailable: %s", service, EnvRequire, why)
	}
	t.Skipf("%s unavailable (%s); set %s or start it to run this test", service, why, envFor(service))
}

func envFor(service string) string {
	switch service {
	case "redis":
		return EnvRedis
	case "postgres":
		return EnvPostgres
	}
	return EnvMySQL
}

var (
	probeMu    sync.Mutex
	probeCache = map[string]error{}
)

// reachable dials addr once per process (cached) with a short timeout.
func reachable(addr string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probeCache[addr]; ok {
		return err
	}
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err == nil {
		_ = c.Close()
	}
	probeCache[addr] = err
	return err
}

// Name returns base followed by a random suffix: a lower-case identifier safe
// for SQL table names and unique per call.
func Name(base string) string { return base + "_" + randomHex(6) }

// Prefix returns a unique Redis key prefix for one test, ending in ':'.
func Prefix() string { return "idemtest:" + randomHex(6) + ":" }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
