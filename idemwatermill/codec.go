package idemwatermill

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// magic starts every result the middleware records: the messages a run
// produced. A result without it (completed by hand through
// sqllayer.CompleteReservation, with the caller's own bytes) produced no
// messages.
var magic = []byte("idemwatermill/1\n")

// produced is the recorded form of one message a run produced.
type produced struct {
	UUID     string            `json:"uuid"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Payload  []byte            `json:"payload"`
}

// encode returns the result that records msgs: empty for none.
func encode(msgs []*message.Message) ([]byte, error) {
	if len(msgs) == 0 {
		return []byte{}, nil
	}
	rec := make([]produced, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("idemwatermill: produced message %d is nil", i)
		}
		rec[i] = produced{UUID: m.UUID, Metadata: m.Metadata, Payload: m.Payload}
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("idemwatermill: recording the produced messages: %w", err)
	}
	return append(append(make([]byte, 0, len(magic)+len(body)), magic...), body...), nil
}

// decode returns the messages a result records: none for a result that is
// not the middleware's (see magic).
func decode(result []byte) ([]*message.Message, error) {
	body, ok := bytes.CutPrefix(result, magic)
	if !ok {
		return nil, nil
	}
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
