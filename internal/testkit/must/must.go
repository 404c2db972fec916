package must

import "testing"

// Get takes a constructor's two results as they come and returns a function
// of the test: it fails tb at once (FailNow) when err is not nil, and
// returns v otherwise.
func Get[T any](v T, err error) func(tb testing.TB) T {
	return func(tb testing.TB) T {
		tb.Helper()
		if err != nil {
			tb.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}
