package idemgrpc

import (
	"errors"
	"fmt"
	"slices"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The stored form of an answer, as the Store keeps it: a format byte, then
// fields in protobuf wire format, written by hand in a fixed order so that
// one answer always has the same bytes:
//
//	1  bytes  the response message, as a google.protobuf.Any (its type URL
//	          and its deterministic encoding)
//	2  bytes  a kept error, as a google.rpc.Status (code, message, details)
//	3  bytes  one header metadata entry (repeated): 1 the key, 2 the value
//	4  bytes  one trailer metadata entry (repeated), as 3
//
// Exactly one of 1 and 2 is present. Readers skip fields they do not know.
const formatV1 = 1

const (
	fieldResponse protowire.Number = 1
	fieldStatus   protowire.Number = 2
	fieldHeader   protowire.Number = 3
	fieldTrailer  protowire.Number = 4
	fieldMDKey    protowire.Number = 1
	fieldMDValue  protowire.Number = 2
)

// errCorrupt reports stored bytes that are not an answer this package
// wrote.
var errCorrupt = errors.New("idemgrpc: stored answer unreadable")

// answer is one stored answer: a response or a kept status, and the
// metadata the handler set that the interceptor replays.
type answer struct {
	response *anypb.Any
	status   *spb.Status
	header   metadata.MD
	trailer  metadata.MD
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// asAny wraps m in an Any with its deterministic encoding. The type URL is
// the one anypb.New writes.
func asAny(m proto.Message) (*anypb.Any, error) {
	b, err := deterministic.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}, nil
}

func (a *answer) encode() ([]byte, error) {
	b := []byte{formatV1}
	var (
		field protowire.Number
		m     proto.Message
	)
	switch {
	case a.response != nil:
		field, m = fieldResponse, a.response
	case a.status != nil:
		field, m = fieldStatus, a.status
	default:
		return nil, errors.New("idemgrpc: an answer without a response or a status")
	}
	body, err := deterministic.Marshal(m)
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendBytes(b, body)
	b = appendMD(b, fieldHeader, a.header)
	b = appendMD(b, fieldTrailer, a.trailer)
	return b, nil
}

// appendMD appends md's entries, keys in sorted order and each key's
// values in the order set.
func appendMD(b []byte, field protowire.Number, md metadata.MD) []byte {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var entry []byte
	for _, k := range keys {
		for _, v := range md[k] {
			entry = protowire.AppendTag(entry[:0], fieldMDKey, protowire.BytesType)
			entry = protowire.AppendString(entry, k)
			entry = protowire.AppendTag(entry, fieldMDValue, protowire.BytesType)
			entry = protowire.AppendString(entry, v)
			b = protowire.AppendTag(b, field, protowire.BytesType)
			b = protowire.AppendBytes(b, entry)
		}
	}
	return b
}

func decodeAnswer(b []byte) (answer, error) {
	var a answer
	if len(b) == 0 || b[0] != formatV1 {
		return a, fmt.Errorf("%w: unknown format", errCorrupt)
	}
	b = b[1:]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return a, fmt.Errorf("%w: %w", errCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return a, fmt.Errorf("%w: %w", errCorrupt, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return a, fmt.Errorf("%w: %w", errCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch num {
		case fieldResponse:
			a.response = new(anypb.Any)
			err = proto.Unmarshal(v, a.response)
		case fieldStatus:
			a.status = new(spb.Status)
			err = proto.Unmarshal(v, a.status)
		case fieldHeader:
			a.header, err = consumeMD(a.header, v)
		case fieldTrailer:
			a.trailer, err = consumeMD(a.trailer, v)
		}
		if err != nil {
			return a, fmt.Errorf("%w: %w", errCorrupt, err)
		}
	}
	if (a.response == nil) == (a.status == nil) {
		return a, fmt.Errorf("%w: want one response or one status", errCorrupt)
	}
	return a, nil
}

// consumeMD adds the entry in b to md.
func consumeMD(md metadata.MD, b []byte) (metadata.MD, error) {
	var key, val string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return md, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
		} else {
			var s string
			s, n = protowire.ConsumeString(b)
			switch num {
			case fieldMDKey:
				key = s
			case fieldMDValue:
				val = s
			}
		}
		if n < 0 {
			return md, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if key == "" {
		return md, errors.New("metadata entry without a key")
	}
	if md == nil {
		md = metadata.MD{}
	}
	md[key] = append(md[key], val)
	return md, nil
}

// sameAnswer reports whether the stored answers a and b carry the same
// response message or kept status, whatever their metadata: metadata the
// handler set after its answer was completed is not part of it.
func sameAnswer(a, b []byte) bool {
	if a == nil || b == nil {
		return false
	}
	if string(a) == string(b) {
		return true
	}
	x, err := decodeAnswer(a)
	if err != nil {
		return false
	}
	y, err := decodeAnswer(b)
	if err != nil {
		return false
	}
	if x.response != nil || y.response != nil {
		return x.response != nil && y.response != nil && proto.Equal(x.response, y.response)
	}
	return proto.Equal(x.status, y.status)
}
