package main

import "testing"

func TestDecodeAnswerKinds(t *testing.T) {
	for _, c := range []struct {
		name   string
		result []byte
		kind   string
	}{
		{"empty", []byte{}, "empty"},
		{"watermill", []byte("idemwatermill/1\n[{\"uuid\":\"u\"}]"), "watermill"},
		{"opaque", []byte("charged 100"), "opaque"},
		{"grpc error", []byte{1, 0x12, 4, 0x08, 5, 0x12, 0}, "grpc"},
		{"grpc truncated", []byte{1, 0x0a, 9, 0x0a}, "opaque"},
		{"http", []byte{1, 0, 0, 200, 0, 2, 'o', 'k'}, "http"},
	} {
		a := decodeAnswer(c.result)
		if a.Kind != c.kind || a.Bytes != len(c.result) || len(a.lines()) == 0 {
			t.Errorf("%s: %+v, want kind %s", c.name, a, c.kind)
		}
	}
	if a := decodeAnswer([]byte{1, 0x12, 4, 0x08, 5, 0x12, 0}); a.Code == nil || *a.Code != 5 {
		t.Errorf("gRPC error code: %+v", a)
	}
}
