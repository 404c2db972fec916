package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// bodyStart is how many bytes of a stored body get shows.
const bodyStart = 64

// answer is a stored result as get shows it, decoded where the command
// knows its writer.
type answer struct {
	// Kind is "http" (the middleware's response), "grpc" (idemgrpc's
	// answer), "watermill" (idemwatermill's produced messages),
	// "not_replayable" (the Store's marker for a result too
	// large to keep), "empty" or "opaque" (a caller's own bytes).
	Kind      string              `json:"kind"`
	Bytes     int                 `json:"bytes"`
	Status    int                 `json:"status,omitempty"`
	Headers   map[string][]string `json:"headers,omitempty"`
	BodyBytes int                 `json:"body_bytes,omitempty"`
	BodyStart string              `json:"body_start,omitempty"`
	// Tombstone is set for a response sent but not kept: why.
	Tombstone string `json:"tombstone,omitempty"`
	// gRPC: the response's message type, or the kept error's code and
	// message, and how many metadata entries are replayed.
	MessageType string `json:"message_type,omitempty"`
	Code        *int   `json:"code,omitempty"`
	Message     string `json:"message,omitempty"`
	Metadata    int    `json:"metadata,omitempty"`
	// Watermill: the messages the handler produced, which a duplicate
	// publishes again.
	Messages []produced `json:"messages,omitempty"`
}

func decodeAnswer(result []byte) *answer {
	a := &answer{Bytes: len(result)}
	switch {
	case len(result) == 0:
		a.Kind = "empty"
	case tiered.IsNotReplayable(result):
		a.Kind = "not_replayable"
	case decodeWatermill(result, a):
	default:
		if r, err := middleware.DecodeStoredResponse(result); err == nil {
			a.Kind, a.Status, a.Headers, a.Tombstone = "http", r.Status, r.Header, r.Reason
			a.BodyBytes, a.BodyStart = len(r.Body), printable(r.Body[:min(len(r.Body), bodyStart)])
			if len(r.Body) == 0 {
				a.BodyStart = ""
			}
		} else if !decodeGRPC(result, a) {
			a.Kind, a.BodyStart = "opaque", printable(result[:min(len(result), bodyStart)])
		}
	}
	return a
}

// decodeGRPC reads the stored form of an idemgrpc answer (a format byte,
// 1, then protobuf fields: 1 the response as a google.protobuf.Any, 2 a
// kept google.rpc.Status, 3 and 4 metadata entries) far enough to name
// what it holds. It reports false for bytes of any other form.
func decodeGRPC(b []byte, a *answer) bool {
	if len(b) < 2 || b[0] != 1 {
		return false
	}
	var seen bool
	err := eachField(b[1:], func(num int, wire int, v []byte, n uint64) error {
		switch {
		case num == 1 && wire == 2:
			seen = true
			return eachField(v, func(num, wire int, v []byte, _ uint64) error {
				if num == 1 && wire == 2 {
					a.MessageType = strings.TrimPrefix(string(v), "type.googleapis.com/")
				}
				return nil
			})
		case num == 2 && wire == 2:
			seen = true
			code := 0
			a.Code = &code
			return eachField(v, func(num, wire int, v []byte, n uint64) error {
				switch {
				case num == 1 && wire == 0:
					code = int(n)
				case num == 2 && wire == 2:
					a.Message = string(v)
				}
				return nil
			})
		case (num == 3 || num == 4) && wire == 2:
			a.Metadata++
		}
		return nil
	})
	if err != nil || !seen {
		*a = answer{Bytes: len(b)}
		return false
	}
	a.Kind = "grpc"
	return true
}

// eachField calls fn for each field of protobuf wire-format bytes: its
// number, wire type, and its bytes (wire type 2) or value (wire type 0).
func eachField(b []byte, fn func(num, wire int, v []byte, n uint64) error) error {
	for len(b) > 0 {
		tag, k := binary.Uvarint(b)
		if k <= 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[k:]
		num, wire := int(tag>>3), int(tag&7)
		switch wire {
		case 0:
			n, k := binary.Uvarint(b)
			if k <= 0 {
				return io.ErrUnexpectedEOF
			}
			b = b[k:]
			if err := fn(num, wire, nil, n); err != nil {
				return err
			}
		case 2:
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return io.ErrUnexpectedEOF
			}
			v := b[k : k+int(n)]
			b = b[k+int(n):]
			if err := fn(num, wire, v, 0); err != nil {
				return err
			}
		default:
			return fmt.Errorf("wire type %d", wire)
		}
	}
	return nil
}

// lines describes the answer for a person, one line each.
func (a *answer) lines() []string {
	switch a.Kind {
	case "empty":
		return []string{"an empty result (a consumer's Once, or work that returned no bytes)"}
	case "not_replayable":
		return []string{"not replayable: the result was too large to keep; the work ran once"}
	case "watermill":
		out := []string{fmt.Sprintf("%d messages a Watermill handler produced (a duplicate publishes them again)", len(a.Messages))}
		for _, m := range a.Messages {
			line := fmt.Sprintf("  %s: %d metadata entries, payload %d bytes", m.UUID, m.Metadata, m.PayloadBytes)
			if m.PayloadStart != "" {
				line += ": " + m.PayloadStart
			}
			out = append(out, line)
		}
		return out
	case "grpc":
		if a.Code != nil {
			return []string{fmt.Sprintf("gRPC error: code %d, %q (%d metadata entries)", *a.Code, a.Message, a.Metadata)}
		}
		return []string{fmt.Sprintf("gRPC response: %s (%d metadata entries)", a.MessageType, a.Metadata)}
	case "http":
		if a.Tombstone != "" {
			return []string{fmt.Sprintf("HTTP %d, not kept (%s): every retry gets 409 not replayable", a.Status, a.Tombstone)}
		}
		out := []string{fmt.Sprintf("HTTP %d, body %d bytes", a.Status, a.BodyBytes)}
		names := make([]string, 0, len(a.Headers))
		for n := range a.Headers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			for _, v := range a.Headers[n] {
				out = append(out, fmt.Sprintf("  %s: %s", n, v))
			}
		}
		if a.BodyStart != "" {
			out = append(out, "  body: "+a.BodyStart)
		}
		return out
	}
	return []string{fmt.Sprintf("%d bytes of the caller's own: %s", a.Bytes, a.BodyStart)}
}
