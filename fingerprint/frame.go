package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Prefix starts every digest. It names the version of the digest format:
// what goes into the hash and how it is framed. A change to either gets a
// new prefix, so that a stored fingerprint never silently changes meaning.
const Prefix = "f1:"

// DigestLen is the length of every digest: Prefix and the 64 lower-case hex
// digits of a SHA-256 sum.
const DigestLen = len(Prefix) + 2*sha256.Size

// domain opens every hashed message. Each part after it is a tag byte, a
// 64-bit big-endian length and that many bytes, so that no two different
// requests can produce the same message by shifting bytes between parts.
const domain = "idem.fingerprint.v1\x00"

// Part tags, in the order the parts are written.
const (
	tagMethod = 'M'
	tagRoute  = 'R'
	tagQuery  = 'Q'
	tagHeader = 'H'
	tagBody   = 'B'
)

// Body kinds, the first byte of the body part.
const (
	bodyEmpty = 'e'
	bodyJSON  = 'j'
	bodyForm  = 'f'
	bodyBytes = 'b'
)

// begin appends a part header with a length to be filled in by end, and
// returns the offset of that length.
func begin(dst []byte, tag byte) ([]byte, int) {
	dst = append(dst, tag, 0, 0, 0, 0, 0, 0, 0, 0)
	return dst, len(dst) - 8
}

// end fills in the length of the part whose header begin wrote at at.
func end(dst []byte, at int) {
	binary.BigEndian.PutUint64(dst[at:], uint64(len(dst)-at-8))
}

// appendStr appends a flag byte, the 64-bit length of s and s.
func appendStr[S string | []byte](dst []byte, flag byte, s S) []byte {
	dst = append(dst, flag)
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendCount(dst []byte, n int) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(n))
}

// digest hashes a whole message into the package's digest string.
func digest(msg []byte) string {
	sum := sha256.Sum256(msg)
	var out [DigestLen]byte
	copy(out[:], Prefix)
	hex.Encode(out[len(Prefix):], sum[:])
	return string(out[:])
}
