package option_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/option"
)

type config struct{ n int }

type opt func(*config) error

func set(n int) opt {
	return func(c *config) error {
		if n < 0 {
			return errors.New("WithN: give 0 or more (got a negative n)")
		}
		c.n = n
		return nil
	}
}

var errInner = errors.New("WithZ: give a path")

// Options apply in order, nil ones skipped; the refusal names the package
// once, every fault on a line of its own, and wraps idem.ErrConfig and
// each fault.
func TestApplyAndRefuse(t *testing.T) {
	c := config{n: 7}
	if faults := option.Apply(&c, []opt{set(1), nil, set(2)}); len(faults) != 0 || c.n != 2 {
		t.Fatalf("faults %v, n %d; want none and 2", faults, c.n)
	}
	if err := option.Refuse("pkg", nil, nil); err != nil {
		t.Fatalf("Refuse of no fault: %v", err)
	}
	faults := option.Apply(&c, []opt{set(-1), set(3), set(-2)})
	if len(faults) != 2 || c.n != 3 {
		t.Fatalf("faults %v, n %d; want two and 3", faults, c.n)
	}
	err := option.Refuse("pkg", append(faults, errInner)...)
	const want = "idem: configuration error: pkg: WithN: give 0 or more (got a negative n)\n" +
		"WithN: give 0 or more (got a negative n)\nWithZ: give a path"
	if err.Error() != want {
		t.Errorf("refusal reads\n%s\nwant\n%s", err, want)
	}
	if !errors.Is(err, idem.ErrConfig) || !errors.Is(err, errInner) {
		t.Errorf("the refusal does not wrap idem.ErrConfig and its faults: %v", err)
	}
}

// A refusal nested under another package's option reads as one fault of
// that option, with no second idem.ErrConfig text, and keeps its chain.
func TestNested(t *testing.T) {
	inner := option.Refuse("fingerprint", errInner)
	outer := option.Refuse("middleware", option.Nested("WithFingerprint", inner))
	const want = "idem: configuration error: middleware: WithFingerprint: fingerprint: WithZ: give a path"
	if outer.Error() != want {
		t.Errorf("nested refusal reads %q, want %q", outer, want)
	}
	if !errors.Is(outer, errInner) || !errors.Is(outer, idem.ErrConfig) {
		t.Errorf("the nested refusal lost its chain: %v", outer)
	}
	plain := option.Nested("WithFingerprint", errInner)
	if plain.Error() != "WithFingerprint: WithZ: give a path" || !errors.Is(plain, errInner) {
		t.Errorf("a plain error nested reads %q", plain)
	}
}
