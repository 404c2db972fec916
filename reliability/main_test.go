package reliability_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// Store, layer, client, pool, proxy and server a test starts is stopped by
// the end of that test.
func TestMain(m *testing.M) {
	// go-redis logs each failed dial; the scenarios fail dials on purpose.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
