package idemtest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// guarded mounts the middleware in front of h with opts, on net/http.
func guarded(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
	mw, err := middleware.New(store, opts...)
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}

func TestStackCheck(t *testing.T) {
	tiers := Memory(t)
	for _, c := range []struct {
		name  string
		stack Stack
		want  string // in the error; "" for none
	}{
		{"empty", Stack{}, "Stack.Mount is required"},
		{"no tiers", Stack{Mount: guarded}, "Stack.Tiers is required"},
		{"no mount", Stack{Tiers: tiers}, "Stack.Mount is required"},
		{"complete", Stack{Mount: guarded, Tiers: tiers}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.stack.check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("check: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("check: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestRunNetHTTP runs the kit on net/http over memory layers, with an
// observer among the stack's Store options: its events show that the
// options reach the Stores the kit builds (one function builds them all).
func TestRunNetHTTP(t *testing.T) {
	var events atomic.Int64
	t.Cleanup(func() { // after every row
		if events.Load() == 0 {
			t.Error("the stack's observer saw no event")
		}
	})
	Run(t, Stack{
		Mount: guarded,
		Tiers: Memory(t),
		StoreOptions: []tiered.Option{tiered.WithObserver(idem.ObserverFunc(func(context.Context, idem.Event) {
			events.Add(1)
		}))},
	})
}

// broken are stacks with a mistake the kit must find, by the name the
// helper process knows them by.
var broken = map[string]Mount{
	// The service drops the options it was given: the middleware runs on
	// its defaults and the service's own single scope.
	"drops options": func(store *tiered.Store, _ []middleware.Option, h http.Handler) (http.Handler, error) {
		return guarded(store, []middleware.Option{middleware.WithSingleTenant()}, h)
	},
	// The service makes every configuration single-tenant, whatever it is
	// given: one caller's answer reaches every other.
	"unscoped": func(store *tiered.Store, opts []middleware.Option, h http.Handler) (http.Handler, error) {
		return guarded(store, append(opts, middleware.WithSingleTenant()), h)
	},
	// The service forgot the middleware.
	"no middleware": func(_ *tiered.Store, _ []middleware.Option, h http.Handler) (http.Handler, error) {
		return h, nil
	},
}

// TestHelperBrokenStack is the process TestKitFindsBrokenStacks starts: it
// runs the kit against the broken stack named by IDEMTEST_BROKEN, and does
// nothing when that is unset.
func TestHelperBrokenStack(t *testing.T) {
	name := os.Getenv("IDEMTEST_BROKEN")
	if name == "" {
		return
	}
	Run(t, Stack{Mount: broken[name], Tiers: Memory(t)})
}

// TestKitFindsBrokenStacks runs the kit against broken stacks in a process
// of their own and checks that it fails the rows the mistake breaks, and
// only those it must.
func TestKitFindsBrokenStacks(t *testing.T) {
	for _, c := range []struct {
		name       string
		fail, pass []string // rows, as the test output names them
	}{
		{"drops options",
			[]string{"required_key_missing", "body_over_limit", "replay_marker", "derived_key", "tenants_never_meet", "chain/key_missing"},
			[]string{"completed_replay", "mismatch", "malformed_keys", "burst", "cuts"}},
		{"unscoped",
			[]string{"a_scope_is_required", "tenants_never_meet", "no_principal_is_refused", "a_derived_key_is_scoped"},
			[]string{"completed_replay", "mismatch", "derived_key", "required_key_missing"}},
		{"no middleware",
			[]string{"completed_replay", "mismatch", "malformed_keys", "burst", "chain/executed_then_replayed"},
			[]string{"no_key_passes_through"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperBrokenStack$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "IDEMTEST_BROKEN="+c.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the kit passed a stack that %s (%v):\n%s", c.name, err, out)
			}
			for _, r := range c.fail {
				if !strings.Contains(string(out), "--- FAIL: TestHelperBrokenStack/"+r+" ") {
					t.Errorf("row %s did not fail", r)
				}
			}
			for _, r := range c.pass {
				if !strings.Contains(string(out), "--- PASS: TestHelperBrokenStack/"+r+" ") {
					t.Errorf("row %s did not pass", r)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}
