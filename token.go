package idem

import (
	"crypto/rand"
	"encoding/base64"
)

// TokenSize is the length of a token made by NewToken.
const TokenSize = 22

// NewToken returns a fresh random owner token: 128 bits from crypto/rand,
// base64url without padding (22 characters). Tokens are never derived from
// the key, so two claims of one key never share a token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return base64.RawURLEncoding.EncodeToString(b[:])
}
