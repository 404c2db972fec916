package idemgrpc

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestCodecRoundTrip(t *testing.T) {
	resp, err := structpb.NewStruct(map[string]any{"b": 2, "a": []any{1, "x"}, "c": map[string]any{"z": true, "y": nil}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := asAny(resp)
	if err != nil {
		t.Fatal(err)
	}
	hdr := metadata.MD{"location": {"/p/1"}, "x-bin": {"\x00", "\x01"}}
	for name, a := range map[string]answer{
		"response":          {response: r},
		"response+metadata": {response: r, header: hdr, trailer: metadata.Pairs("t", "1")},
		"status":            {status: status.New(codes.NotFound, "no such order").Proto()},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := a.encode()
			if err != nil {
				t.Fatal(err)
			}
			again, err := a.encode()
			if err != nil || !bytes.Equal(v, again) {
				t.Fatalf("two encodings differ: %v", err)
			}
			got, err := decodeAnswer(v)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got.response, a.response) || !proto.Equal(got.status, a.status) {
				t.Errorf("decoded %v %v, want %v %v", got.response, got.status, a.response, a.status)
			}
			if len(got.header) != len(a.header) || len(got.trailer) != len(a.trailer) {
				t.Errorf("metadata %v %v, want %v %v", got.header, got.trailer, a.header, a.trailer)
			}
			for k, vs := range a.header {
				if g := got.header[k]; len(g) != len(vs) || (len(vs) > 0 && g[len(g)-1] != vs[len(vs)-1]) {
					t.Errorf("header %s: %q, want %q", k, g, vs)
				}
			}
			if a.response != nil {
				m, err := got.response.UnmarshalNew()
				if err != nil || !proto.Equal(m, resp) {
					t.Errorf("response %v (%v), want %v", m, err, resp)
				}
			}
		})
	}
	if _, err := (&answer{}).encode(); err == nil {
		t.Error("an empty answer encoded")
	}
}

func TestCodecRefusesCorrupt(t *testing.T) {
	r, _ := asAny(&structpb.Struct{})
	good, err := (&answer{response: r}).encode()
	if err != nil {
		t.Fatal(err)
	}
	both, err := (&answer{response: r}).encode()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := (&answer{status: status.New(codes.NotFound, "x").Proto()}).encode()
	both = append(both, st[1:]...)
	for name, v := range map[string][]byte{
		"empty":          nil,
		"other format":   append([]byte{9}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"nothing":        {formatV1},
		"both":           both,
		"bad md entry":   append(bytes.Clone(good), 0x1a, 0x02, 0x12, 0x00), // header entry with a value and no key
		"broken varint":  {formatV1, 0x08, 0xff},
		"broken length":  {formatV1, 0x0a, 0x05, 0x00},
		"unknown fields": {formatV1, 0x28, 0x01}, // a varint field 5 alone: no response
	} {
		if _, err := decodeAnswer(v); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", name, err)
		}
	}
}

// Stored bytes, whatever they are, never panic the reader.
func FuzzDecodeAnswer(f *testing.F) {
	r, _ := asAny(&structpb.Struct{})
	good, _ := (&answer{response: r, header: metadata.Pairs("a", "b")}).encode()
	f.Add(good)
	st, _ := (&answer{status: status.New(codes.NotFound, "x").Proto()}).encode()
	f.Add(st)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAnswer(b)
		if err == nil && (a.response == nil) == (a.status == nil) {
			t.Fatal("decoded an answer with neither or both")
		}
	})
}
