package fingerprint

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newBuilder returns a Builder with opts, failing tb when New refuses them.
func newBuilder(tb testing.TB, opts ...Option) *Builder {
	tb.Helper()
	b, err := New(opts...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return b
}
