package option

import (
	"errors"

	"github.com/idemkit/idem"
)

// Apply applies opts to c in order and returns the faults they report, in
// the same order. A nil option is skipped.
func Apply[C any, O ~func(*C) error](c *C, opts []O) []error {
	var faults []error
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			faults = append(faults, err)
		}
	}
	return faults
}

// Refuse returns nil when faults holds no error (nils are skipped), and
// otherwise the constructor's refusal: one error that wraps idem.ErrConfig
// and every fault, in the form the package documentation shows, pkg being
// the package that refuses.
func Refuse(pkg string, faults ...error) error {
	err := errors.Join(faults...)
	if err == nil {
		return nil
	}
	return &refusal{pkg: pkg, faults: err}
}

// refusal is what Refuse returns. Its text is the one fmt.Errorf("%w: %s:
// %w", idem.ErrConfig, pkg, faults) gives, and tiered.New, which words its
// own, gives.
type refusal struct {
	pkg    string
	faults error
}

func (r *refusal) Error() string {
	return idem.ErrConfig.Error() + ": " + r.pkg + ": " + r.faults.Error()
}

func (r *refusal) Unwrap() []error { return []error{idem.ErrConfig, r.faults} }

// Nested states err, the refusal of a constructor that an option of
// another package calls (fingerprint.New under middleware.WithFingerprint),
// as a fault of that option, as idem.NestedConfigError does for the
// integration modules: "option: pkg: WithZ: what to do", without a second
// idem.ErrConfig text in the middle of the first. errors.Is and errors.As
// still find every fault in it (fingerprint.ErrInvalidPath).
func Nested(option string, err error) error { return idem.NestedConfigError(option, err) }
