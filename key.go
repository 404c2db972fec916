package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// KeySize is the size in bytes of a key digest.
const KeySize = sha256.Size

// keyDomain separates idem key digests from every other SHA-256 use. Changing
// it changes every key, so it carries a version.
const keyDomain = "idem/key/v1"

// maxLabel bounds how much of the scope and client key a Key keeps as labels
// for operators. The digest always covers the whole input.
const maxLabel = 255

// Key is the storage key of one idempotent operation: a SHA-256 digest over a
// scope and a client key, so that any client key, whatever its length or
// bytes, is safe to use in Redis and SQL, and two scopes never share a key.
//
// A Key also carries the scope and client key it was built from (cut to 255
// bytes) as labels for operators; they do not take part in equality of
// digests. Use [Key.Digest] or [Key.Hex] as a map key: a Key made from its
// hex form ([KeyFromHex]) has no labels, so it is not == to the Key built
// by [NewKey].
//
// The zero Key is invalid; layers reject it.
type Key struct {
	digest [KeySize]byte
	scope  string
	client string
}

// NewKey returns the Key for clientKey within scope. scope may be "" (one
// global scope). The digest is length-prefixed, so ("ab", "c") and ("a", "bc")
// are different keys.
func NewKey(scope, clientKey string) Key {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(keyDomain))
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	binary.BigEndian.PutUint64(n[:], uint64(len(clientKey)))
	h.Write(n[:])
	h.Write([]byte(clientKey))
	k := Key{scope: cut(scope), client: cut(clientKey)}
	h.Sum(k.digest[:0])
	return k
}

func cut(s string) string {
	if len(s) > maxLabel {
		return s[:maxLabel]
	}
	return s
}

// KeyFromDigest returns the Key with the given digest and no labels.
func KeyFromDigest(d [KeySize]byte) Key { return Key{digest: d} }

// KeyFromHex returns the Key whose digest is the hexadecimal form returned
// by [Key.Hex]. The result has no labels. A string that is not 64
// hexadecimal characters, or names the zero digest, gives an error wrapping
// [ErrInvalidKey].
func KeyFromHex(s string) (Key, error) {
	var k Key
	if len(s) != 2*KeySize {
		return Key{}, fmt.Errorf("%w: want %d hex characters, got %d", ErrInvalidKey, 2*KeySize, len(s))
	}
	if _, err := hex.Decode(k.digest[:], []byte(s)); err != nil {
		return Key{}, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	if k.IsZero() {
		return Key{}, fmt.Errorf("%w: zero digest", ErrInvalidKey)
	}
	return k, nil
}

// ErrInvalidKey reports a malformed or zero key.
var ErrInvalidKey = errors.New("idem: invalid key")

// Digest returns the key's digest.
func (k Key) Digest() [KeySize]byte { return k.digest }

// Hex returns the digest as 64 lowercase hexadecimal characters, the form
// layers store.
func (k Key) Hex() string { return hex.EncodeToString(k.digest[:]) }

// String returns a short, log-safe form of the key: the first 16 hex
// characters of the digest. It never contains the scope or client key.
func (k Key) String() string { return hex.EncodeToString(k.digest[:8]) }

// Scope returns the scope the key was built from (at most 255 bytes), or ""
// for a key built from a digest.
func (k Key) Scope() string { return k.scope }

// ClientKey returns the client key the key was built from (at most 255
// bytes), or "" for a key built from a digest. It may be sensitive: do not log
// it.
func (k Key) ClientKey() string { return k.client }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.digest == [KeySize]byte{} }

// Equal reports whether k and o have the same digest, whatever their labels.
func (k Key) Equal(o Key) bool { return k.digest == o.digest }
