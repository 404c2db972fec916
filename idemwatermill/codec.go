package idemwatermill

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ThreeDotsLabs/watermill/message"
)

// magic starts every result the middleware records: the messages a run
// produced, in the byte-exact form below. A result without it or
// magicJSON (completed by hand through sqllayer.CompleteReservation, with
// the caller's own bytes) produced no messages.
//
// The form after magic is a sequence of length-prefixed fields, each
// length an unsigned varint: the number of messages, then for each its
// UUID, its number of metadata entries, each entry's key and value (in
// key order, so that one set of messages has one encoding), and its
// payload. Every string is kept as the bytes it holds, invalid UTF-8
// included.
var magic = []byte("idemwatermill/2\n")

// magicJSON starts a result recorded by the first releases: the produced
// messages as JSON, whose strings replaced invalid UTF-8 in metadata.
// Those records still decode (a rolling upgrade, a retention's worth of
// old records); nothing writes them any more.
var magicJSON = []byte("idemwatermill/1\n")

// errCorrupt is why a recorded result that starts with magic does not
// decode.
var errCorrupt = errors.New("idemwatermill: the recorded produced messages are corrupt")

// encode returns the result that records msgs: empty for none.
func encode(msgs []*message.Message) ([]byte, error) {
	if len(msgs) == 0 {
		return []byte{}, nil
	}
	size := len(magic) + binary.MaxVarintLen64
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("idemwatermill: produced message %d is nil", i)
		}
		size += 3*binary.MaxVarintLen64 + len(m.UUID) + len(m.Payload)
		for k, v := range m.Metadata {
			size += 2*binary.MaxVarintLen64 + len(k) + len(v)
		}
	}
	b := append(make([]byte, 0, size), magic...)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = appendBytes(b, m.UUID)
		keys := make([]string, 0, len(m.Metadata))
		for k := range m.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendBytes(b, k)
			b = appendBytes(b, m.Metadata[k])
		}
		b = appendBytes(b, m.Payload)
	}
	return b, nil
}

func appendBytes[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decode returns the messages a result records: none for a result that is
// not the middleware's (see magic). Each call returns new messages.
func decode(result []byte) ([]*message.Message, error) {
	if body, ok := bytes.CutPrefix(result, magic); ok {
		return decodeBinary(body)
	}
	if body, ok := bytes.CutPrefix(result, magicJSON); ok {
		return decodeJSON(body)
	}
	return nil, nil
}

// reader reads the fields of the byte-exact form.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	n, w := binary.Uvarint(r.b)
	if w <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[w:]
	return n
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
		r.b = nil
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func decodeBinary(body []byte) ([]*message.Message, error) {
	r := &reader{b: body}
	n := r.uvarint()
	// Every message takes at least three bytes: its UUID's, its
	// metadata's and its payload's lengths.
	if r.bad || n > uint64(len(r.b))/3 {
		return nil, errCorrupt
	}
	msgs := make([]*message.Message, 0, n)
	for range n {
		uuid := string(r.bytes())
		entries := r.uvarint()
		if r.bad || entries > uint64(len(r.b))/2 {
			return nil, errCorrupt
		}
		md := make(message.Metadata, entries)
		for range entries {
			k := string(r.bytes())
			md[k] = string(r.bytes())
		}
		payload := r.bytes()
		if r.bad || len(md) != int(entries) {
			return nil, errCorrupt
		}
		// The payload is the result's: a copy, so that a handler
		// downstream that changes it changes no record nor the cache.
		m := message.NewMessage(uuid, bytes.Clone(payload))
		m.Metadata = md
		msgs = append(msgs, m)
	}
	if len(r.b) != 0 {
		return nil, errCorrupt
	}
	return msgs, nil
}

// produced is the recorded form of one message in magicJSON's records.
type produced struct {
	UUID     string            `json:"uuid"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Payload  []byte            `json:"payload"`
}

func decodeJSON(body []byte) ([]*message.Message, error) {
	var rec []produced
	if err := json.Unmarshal(body, &rec); err != nil {
		return nil, fmt.Errorf("idemwatermill: the recorded produced messages do not decode: %w", err)
	}
	msgs := make([]*message.Message, len(rec))
	for i, p := range rec {
		m := message.NewMessage(p.UUID, p.Payload)
		for k, v := range p.Metadata {
			m.Metadata.Set(k, v)
		}
		msgs[i] = m
	}
	return msgs, nil
}

// payloadDigest is the fingerprint of a message identified by its UUID or
// a metadata field: the payload, byte for byte.
func payloadDigest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return "wm1:" + hex.EncodeToString(sum[:])
}
