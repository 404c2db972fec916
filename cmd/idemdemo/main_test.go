package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/internal/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demonstration is part of the test suite: every scenario must pass on
// the embedded backends, and on the real ones when the environment names
// them.
func TestDemoScenarios(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"embedded", []string{"-redis", "", "-postgres", ""}},
	}
	// The real servers, when this machine has them (required under
	// IDEM_REQUIRE_SERVICES=1).
	_, rerr := testenv.RedisOptions()
	_, perr := testenv.PostgresDSN()
	switch {
	case rerr == nil && perr == nil:
		cases = append(cases, struct {
			name string
			args []string
		}{"real", []string{"-redis", orDefault(testenv.EnvRedis, testenv.DefaultRedisURL), "-postgres", orDefault(testenv.EnvPostgres, testenv.DefaultPostgresDSN)}})
	case testenv.Required():
		t.Fatalf("real services required but unavailable: redis: %v, postgres: %v", rerr, perr)
	default:
		t.Logf("no real redis and postgres (%v, %v): the demo runs on the embedded pair only", rerr, perr)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
			}
			if !strings.Contains(out.String(), "all 8 scenarios passed") {
				t.Fatalf("output:\n%s", out.String())
			}
			t.Log("\n" + out.String())
		})
	}
}

func orDefault(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

func TestBadBackendIsAClearError(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-redis", "redis://127.0.0.1:1/0", "-postgres", ""}, &out, &errs)
	if code == 0 || !strings.Contains(errs.String(), "does not answer") {
		t.Fatalf("exit %d, stderr %q: want a clear error", code, errs.String())
	}
}
