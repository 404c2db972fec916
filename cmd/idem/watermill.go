package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// The messages an idemwatermill handler produced, as its record holds
// them: read here without Watermill, as an operator's tool needs them (how
// many, their UUIDs, metadata and payload sizes), in both of the forms
// idemwatermill writes or wrote.
var (
	watermillMagic     = []byte("idemwatermill/2\n") // length-prefixed fields, byte for byte
	watermillMagicJSON = []byte("idemwatermill/1\n") // the first releases': JSON
)

// produced is one message as get shows it.
type produced struct {
	UUID         string `json:"uuid"`
	Metadata     int    `json:"metadata"`
	PayloadBytes int    `json:"payload_bytes"`
	PayloadStart string `json:"payload_start,omitempty"`
}

// decodeWatermill fills a with the messages result records, and reports
// whether it is one of idemwatermill's records that decodes.
func decodeWatermill(result []byte, a *answer) bool {
	var msgs []produced
	var ok bool
	if body, found := bytes.CutPrefix(result, watermillMagic); found {
		msgs, ok = watermillFields(body)
	} else if body, found := bytes.CutPrefix(result, watermillMagicJSON); found {
		msgs, ok = watermillJSON(body)
	}
	if !ok {
		return false
	}
	a.Kind, a.Messages = "watermill", msgs
	return true
}

// watermillFields reads the length-prefixed form: the count of messages,
// then each one's UUID, its metadata entries (key, value) and its payload,
// every length an unsigned varint.
func watermillFields(b []byte) ([]produced, bool) {
	bad := false
	uvarint := func() uint64 {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			bad, b = true, nil
			return 0
		}
		b = b[w:]
		return n
	}
	field := func() []byte {
		n := uvarint()
		if n > uint64(len(b)) {
			bad, b = true, nil
			return nil
		}
		v := b[:n]
		b = b[n:]
		return v
	}
	n := uvarint()
	if bad || n > uint64(len(b))/3 {
		return nil, false
	}
	out := make([]produced, 0, n)
	for range n {
		p := produced{UUID: printable(field())}
		entries := uvarint()
		if bad || entries > uint64(len(b))/2 {
			return nil, false
		}
		for range entries {
			field()
			field()
		}
		payload := field()
		if bad {
			return nil, false
		}
		p.Metadata, p.PayloadBytes = int(entries), len(payload)
		p.PayloadStart = printable(payload[:min(len(payload), bodyStart)])
		out = append(out, p)
	}
	return out, len(b) == 0
}

// watermillJSON reads the first releases' form.
func watermillJSON(b []byte) ([]produced, bool) {
	var rec []struct {
		UUID     string            `json:"uuid"`
		Metadata map[string]string `json:"metadata"`
		Payload  []byte            `json:"payload"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return nil, false
	}
	out := make([]produced, len(rec))
	for i, r := range rec {
		out[i] = produced{UUID: printable([]byte(r.UUID)), Metadata: len(r.Metadata), PayloadBytes: len(r.Payload),
			PayloadStart: printable(r.Payload[:min(len(r.Payload), bodyStart)])}
	}
	return out, true
}
