package middleware

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest client key accepted: 255 bytes, counted after a
// quoted key is unquoted.
const MaxKeyLen = 255

// Errors of ParseKeyHeader, checked with errors.Is. Both are answered with
// 400.
var (
	// ErrNoKey reports a request without the key header.
	ErrNoKey = errors.New("middleware: no idempotency key")
	// ErrMalformedKey reports a key header that is not one well-formed key:
	// several header lines, an empty value, more than MaxKeyLen bytes, a
	// byte outside printable ASCII, or a broken quoted string.
	ErrMalformedKey = errors.New("middleware: malformed idempotency key")
)

// ParseKeyHeader returns the client key carried by the values of the key
// header (r.Header["Idempotency-Key"]).
//
// A key is 1 to MaxKeyLen bytes of printable ASCII (0x20–0x7E), sent on one
// header line, either bare (abc) or as an RFC 8941 string ("abc", where \"
// and \\ stand for " and \); both forms of the same key are the same key.
// Spaces and tabs around the value are ignored. A value that starts with a
// double quote is always read as a string, which must end at its closing
// quote: parameters and anything else after it are malformed.
//
// A bare key must not contain a comma: HTTP lets a proxy join two header
// lines into one with a comma, so "a, b" may be two keys. A key that needs a
// comma is sent quoted.
//
// No value gives ErrNoKey; everything else that is not one key gives an
// error wrapping ErrMalformedKey, whose text names the fault but never
// repeats the key. ParseKeyHeader allocates only to unescape a quoted key.
func ParseKeyHeader(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrNoKey
	case 1:
	default:
		return "", fmt.Errorf("%w: %d header lines, want one", ErrMalformedKey, len(values))
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", fmt.Errorf("%w: empty", ErrMalformedKey)
	}
	if v[0] == '"' {
		return parseQuoted(v)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: byte %#02x at %d is not printable ASCII", ErrMalformedKey, c, i)
		case c == ',':
			return "", fmt.Errorf("%w: comma at %d in a bare key (send it quoted)", ErrMalformedKey, i)
		}
	}
	return checkLen(v)
}

// parseQuoted decodes an RFC 8941 sf-string that starts at v[0] and must end
// at the last byte of v.
func parseQuoted(v string) (string, error) {
	var b *strings.Builder // only once an escape is seen
	start := 1
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			if i+1 == len(v) {
				return "", fmt.Errorf("%w: unterminated string", ErrMalformedKey)
			}
			if e := v[i+1]; e != '"' && e != '\\' {
				return "", fmt.Errorf("%w: bad escape at %d", ErrMalformedKey, i)
			}
			if b == nil {
				b = new(strings.Builder)
				b.Grow(len(v))
			}
			b.WriteString(v[start:i])
			i++
			start = i // the escaped byte itself is kept
		case c == '"':
			if i != len(v)-1 {
				return "", fmt.Errorf("%w: data after the closing quote at %d", ErrMalformedKey, i)
			}
			if b == nil {
				return checkLen(v[1:i])
			}
			b.WriteString(v[start:i])
			return checkLen(b.String())
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: byte %#02x at %d is not printable ASCII", ErrMalformedKey, c, i)
		}
	}
	return "", fmt.Errorf("%w: unterminated string", ErrMalformedKey)
}

func checkLen(k string) (string, error) {
	switch {
	case k == "":
		return "", fmt.Errorf("%w: empty", ErrMalformedKey)
	case len(k) > MaxKeyLen:
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrMalformedKey, len(k), MaxKeyLen)
	}
	return k, nil
}
