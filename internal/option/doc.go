// Package option applies the functional options of idem's packages and
// words what a constructor refuses, so that every constructor of the core
// refuses alike: its options are func(*config) error, applied in order over
// the defaults (a nil option is skipped), and every fault they report is
// joined into one error that wraps idem.ErrConfig and reads
//
//	idem: configuration error: pkg: WithX: what to do (got …)
//	WithY: what to do (got …)
//
// — the package once, then one line per fault, each naming the option (or
// the constructor's argument) at fault and saying what to give instead.
package option
