package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
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
	if os.Getenv("IDEM_REDIS_URL") != "" && os.Getenv("IDEM_POSTGRES_DSN") != "" {
		cases = append(cases, struct {
			name string
			args []string
		}{"real", nil})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(tc.args, &out, &errs); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
			}
			if !strings.Contains(out.String(), "all 7 scenarios passed") {
				t.Fatalf("output:\n%s", out.String())
			}
			t.Log("\n" + out.String())
		})
	}
}

func TestBadBackendIsAClearError(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-redis", "redis://127.0.0.1:1/0", "-postgres", ""}, &out, &errs)
	if code == 0 || !strings.Contains(errs.String(), "does not answer") {
		t.Fatalf("exit %d, stderr %q: want a clear error", code, errs.String())
	}
}
