package must_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idem/internal/testkit/must"
)

func TestGetReturnsTheValue(t *testing.T) {
	if got := must.Get(42, nil)(t); got != 42 {
		t.Fatalf("Get = %d, want 42", got)
	}
}

// fakeTB records what Get does with a failing test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(string, ...any) {
	f.failed = true
	panic(f) // stands in for FailNow's runtime.Goexit
}

func TestGetFailsTheTest(t *testing.T) {
	tb := &fakeTB{}
	func() {
		defer func() {
			if r := recover(); r != tb {
				t.Fatalf("Get did not stop the test (recovered %v)", r)
			}
		}()
		must.Get(0, errors.New("boom"))(tb)
		t.Fatal("Get returned after an error")
	}()
	if !tb.failed {
		t.Fatal("Get did not fail the test")
	}
}
