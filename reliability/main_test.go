package reliability_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// Store, layer, client, pool, proxy and server a test starts is stopped by
// the end of that test.
func TestMain(m *testing.M) {
	// The soak runs its service instances as this binary again, with their
	// configuration in the environment: such a process is a child of the
	// soak, not a test run.
	if cfg := os.Getenv(soakChildEnv); cfg != "" && soakChild != nil {
		os.Exit(soakChild(cfg))
	}
	// go-redis logs each failed dial; the scenarios fail dials on purpose.
	redis.SetLogger(quiet{})
	// The property test's size, unless the command line or the environment
	// sets it: small enough for the package's time budget.
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range map[string]string{"rapid.checks": "20", "rapid.steps": "20", "rapid.nofailfile": "true"} {
		env := "RAPID_" + strings.ToUpper(strings.TrimPrefix(name, "rapid."))
		if _, ok := os.LookupEnv(env); !ok && !set[name] {
			_ = flag.Set(name, v)
		}
	}
	goleak.VerifyTestMain(m)
}

// soakChildEnv holds a soak child's configuration; soakChild runs one
// and returns its exit code (nil where the soak cannot run).
const soakChildEnv = "IDEM_SOAK_CHILD"

var soakChild func(config string) int

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
