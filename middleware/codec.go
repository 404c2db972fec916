package middleware

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The stored form of a response (the Result of its record), version 1:
//
//	byte 0     version (1)
//	byte 1     flags: tombstone reasons, 0 for a replayable response
//	bytes 2–3  status, big-endian (0 only for a hijacked connection)
//	uvarint    number of header fields n
//	n times    uvarint name length, name, uvarint value length, value
//	uvarint    body length, body
//
// Fields are in the order of the replay allow-list, the values of one name
// together and in the order sent. A tombstone has no fields and no body.
const codecVersion = 1

// Tombstone reasons, in the flags byte.
const (
	flagStreamed = 1 << iota // the handler flushed
	flagOversize             // the body passed the response limit
	flagHijacked             // the handler hijacked the connection
	flagsKnown   = flagStreamed | flagOversize | flagHijacked
)

// errCodec reports a stored result that is not a response this version can
// decode: another writer's data, a newer version, or damage.
var errCodec = errors.New("middleware: malformed stored response")

// encode returns the stored form of a response. fields holds name, value
// pairs. The result is allocated once, at its exact size.
func encode(status int, flags byte, fields []string, body []byte) []byte {
	n := 4 + uvarintLen(len(fields)/2) + uvarintLen(len(body)) + len(body)
	for _, f := range fields {
		n += uvarintLen(len(f)) + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, codecVersion, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	b = binary.AppendUvarint(b, uint64(len(fields)/2))
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// stored is a decoded response. head and body alias the stored bytes, which
// are shared with other callers: read only.
type stored struct {
	status int
	flags  byte
	fields int    // number of header fields
	head   []byte // the encoded fields
	body   []byte
}

func (s *stored) tombstone() bool { return s.flags != 0 }

// decode checks b completely and returns a view of it. Every malformed input
// gives an error wrapping errCodec, never a panic.
func decode(b []byte) (stored, error) {
	var s stored
	if len(b) < 4 {
		return s, fmt.Errorf("%w: %d bytes is too short", errCodec, len(b))
	}
	if b[0] != codecVersion {
		return s, fmt.Errorf("%w: unknown version %d", errCodec, b[0])
	}
	s.flags = b[1]
	if s.flags&^flagsKnown != 0 {
		return s, fmt.Errorf("%w: unknown flags %#x", errCodec, s.flags)
	}
	s.status = int(binary.BigEndian.Uint16(b[2:4]))
	if (s.status < 100 || s.status > 999) && !(s.status == 0 && s.flags&flagHijacked != 0) {
		return s, fmt.Errorf("%w: status %d", errCodec, s.status)
	}
	rest := b[4:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) || k != uvarintLen(int(n)) {
		return s, fmt.Errorf("%w: bad field count", errCodec)
	}
	s.fields = int(n)
	rest = rest[k:]
	head := rest
	for i := 0; i < s.fields; i++ {
		var name, value []byte
		var err error
		if name, rest, err = chunk(rest, "name"); err != nil {
			return s, err
		}
		if value, rest, err = chunk(rest, "value"); err != nil {
			return s, err
		}
		if !validName(name) || !validValue(value) {
			return s, fmt.Errorf("%w: bad header field %d", errCodec, i)
		}
	}
	s.head = head[:len(head)-len(rest)]
	body, rest, err := chunk(rest, "body")
	if err != nil {
		return s, err
	}
	if len(rest) != 0 {
		return s, fmt.Errorf("%w: %d trailing bytes", errCodec, len(rest))
	}
	if s.tombstone() && (s.fields != 0 || len(body) != 0) {
		return s, fmt.Errorf("%w: tombstone with content", errCodec)
	}
	s.body = body
	return s, nil
}

func chunk(b []byte, what string) (v, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) || k != uvarintLen(int(n)) { // one encoding per value
		return nil, nil, fmt.Errorf("%w: bad %s length", errCodec, what)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// eachField calls fn for each header field of a decoded response, with
// strings cut from one copy of the encoded fields.
func (s *stored) eachField(fn func(name, value string)) {
	h := string(s.head)
	for range s.fields {
		var name, value string
		name, h = strChunk(h)
		value, h = strChunk(h)
		fn(name, value)
	}
}

// strChunk reads one length-prefixed string of input decode has checked.
func strChunk(h string) (v, rest string) {
	var n uint64
	var k int
	for shift := 0; ; shift += 7 {
		c := h[k]
		k++
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return h[k : k+int(n)], h[k+int(n):]
}

// validName reports whether b is an HTTP field name (an RFC 9110 token).
func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !isTokenChar[c] {
			return false
		}
	}
	return true
}

// validValue reports whether a stored field value is safe to send: no CR,
// LF or NUL (the capture drops such values; this guards the replay).
func validValue[T []byte | string](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

var isTokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// validToken reports whether s is an HTTP token (a field name).
func validToken(s string) bool { return s != "" && strings.IndexFunc(s, notToken) < 0 }

func notToken(r rune) bool { return r >= 0x80 || !isTokenChar[r] }
