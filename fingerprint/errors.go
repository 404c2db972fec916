package fingerprint

import (
	"errors"
	"fmt"
)

// The errors below are returned wrapped (with the byte offset or the member
// name where that helps) and are meant to be checked with errors.Is. Every one
// of them describes bad input or bad configuration, never an internal fault:
// an HTTP layer answers the input errors with 400 Bad Request (413 for
// ErrBodyTooLarge).
var (
	// ErrInvalidJSON reports a body that is not JSON text (RFC 8259): a
	// syntax error, an unexpected end, trailing data after the top-level
	// value, or a body that is only whitespace.
	ErrInvalidJSON = errors.New("fingerprint: invalid JSON")

	// ErrDuplicateMember reports an object with two members of the same name
	// (compared after unescaping). RFC 8785 requires I-JSON input, which
	// forbids them; which of the two a handler would see is undefined.
	ErrDuplicateMember = errors.New("fingerprint: duplicate member name")

	// ErrAmbiguousMember reports an object with two members whose names
	// differ but are equal under Unicode simple case folding, the way
	// encoding/json matches a name to a struct field ("amount" and
	// "AMOUNT"; "k" and U+212A KELVIN SIGN; "s" and U+017F LONG S). A Go
	// handler decoding into a struct keeps whichever comes last, so the
	// two orders of the same members are two different requests to it.
	// A Builder returns it (Sum, Request, RequestBody, Builder.Canonicalize)
	// unless WithCaseSensitiveNames(true); Canonicalize, which is RFC 8785
	// alone, never does.
	ErrAmbiguousMember = errors.New("fingerprint: ambiguous member names")

	// ErrNumberRange reports a number whose magnitude is too large for an
	// IEEE-754 double (above 1.7976931348623157e308 after rounding). Numbers
	// too small to represent round to zero, as in every JSON parser.
	ErrNumberRange = errors.New("fingerprint: number out of range")

	// ErrInvalidString reports a string that holds invalid UTF-8, a raw
	// control character, a malformed escape, or a \u escape naming a lone
	// surrogate (a high surrogate not followed by a low one, or a low one
	// on its own).
	ErrInvalidString = errors.New("fingerprint: invalid string")

	// ErrTooDeep reports objects and arrays nested deeper than the depth
	// limit (DefaultMaxDepth unless WithMaxDepth says otherwise). The limit
	// is checked while scanning, before any work proportional to the depth.
	ErrTooDeep = errors.New("fingerprint: nesting too deep")

	// ErrBodyTooLarge reports a body longer than the size limit
	// (DefaultMaxBytes for a Builder unless WithMaxBytes says otherwise;
	// HardMaxBytes for Canonicalize). It is returned before the body is
	// scanned. (idem.ErrTooLarge is another matter: a result too large for
	// a layer to keep.)
	ErrBodyTooLarge = errors.New("fingerprint: body too large")

	// ErrInvalidPath reports a field path given to WithAllow or WithDeny
	// that does not follow the path syntax described in the package
	// documentation. New returns it (wrapped, naming the path), so a typo
	// never silently widens what counts.
	ErrInvalidPath = errors.New("fingerprint: invalid field path")
)

// errAt wraps a sentinel with a short reason and the byte offset of the
// offending input.
func errAt(sentinel error, reason string, offset int) error {
	return fmt.Errorf("%w: %s at offset %d", sentinel, reason, offset)
}
