package idemgrpc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem/fingerprint"
)

// FingerprintPrefix starts every fingerprint of a call. The digest covers
// a domain string of its own, the full method name and the message's
// fingerprint, so it never equals an HTTP request's.
const FingerprintPrefix = "g1:"

// fpDomain separates these digests from every other SHA-256 use; it
// carries the version that FingerprintPrefix names.
const fpDomain = "idem/grpc/fingerprint/v1"

// errNotProto reports a request or response that is not a proto message.
var errNotProto = errors.New("idemgrpc: not a proto message")

// jsonForm is how a message is written before the Builder canonicalizes
// it: proto field names, so that field lists name fields as the .proto
// file does; no default values, so that a field left out and a field sent
// with its default (which proto3 does not tell apart) are one request.
var jsonForm = protojson.MarshalOptions{UseProtoNames: true}

// Fingerprint returns the fingerprint of a call of fullMethod with the
// request msg, as the interceptor computes it: the message written as
// protojson with proto field names, canonicalized by b (RFC 8785, after
// b's allow- and deny-lists), hashed with fullMethod. Two encodings of the
// same message — fields in another order, map entries in another order,
// packed or not, a default value sent or left out — give the same
// fingerprint. Unknown fields, which the server cannot read, do not count.
//
// b should match names exactly (fingerprint.WithCaseSensitiveNames(true)),
// as the interceptor's own Builder does. A message protojson cannot write
// (an Any whose type is not linked in) gives an error.
func Fingerprint(b *fingerprint.Builder, fullMethod string, msg proto.Message) (string, error) {
	if msg == nil {
		return "", errNotProto
	}
	js, err := jsonForm.Marshal(msg)
	if err != nil {
		return "", fmt.Errorf("idemgrpc: the request message as JSON: %w", err)
	}
	body, err := b.Sum(js)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(fpDomain))
	h.Write([]byte{0})
	h.Write([]byte(fullMethod))
	h.Write([]byte{0})
	h.Write([]byte(body))
	var sum [sha256.Size]byte
	return FingerprintPrefix + hex.EncodeToString(h.Sum(sum[:0])), nil
}
