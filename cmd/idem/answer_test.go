package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// Both forms of idemwatermill's records decode to the messages they hold,
// byte-exact UUIDs and metadata included; a record cut short is shown as
// opaque bytes, not as messages.
func TestDecodeWatermillMessages(t *testing.T) {
	// idemwatermill's own record, which its codec test holds to its
	// encoder: this reader is a copy, without Watermill.
	rec, err := os.ReadFile(filepath.Join("..", "..", "idemwatermill", "testdata", "record-v2.bin"))
	if err != nil {
		t.Fatal(err)
	}
	a := decodeAnswer(rec)
	if a.Kind != "watermill" || len(a.Messages) != 2 || a.Messages[0].UUID != `"u-1"` || a.Messages[0].Metadata != 2 ||
		a.Messages[0].PayloadBytes != 15 || a.Messages[1].UUID != `"u-2"` || a.Messages[1].PayloadBytes != 0 {
		t.Fatalf("binary form: %+v", a)
	}
	if l := a.lines(); len(l) != 3 || !strings.Contains(l[1], `charged`) {
		t.Fatalf("binary form's lines: %q", l)
	}
	if a := decodeAnswer(rec[:len(rec)-3]); a.Kind != "opaque" {
		t.Fatalf("a record cut short: %+v, want opaque", a)
	}
	a = decodeAnswer([]byte(`idemwatermill/1` + "\n" + `[{"uuid":"u-9","metadata":{"k":"v"},"payload":"aGk="}]`))
	if a.Kind != "watermill" || len(a.Messages) != 1 || a.Messages[0].UUID != `"u-9"` || a.Messages[0].Metadata != 1 || a.Messages[0].PayloadBytes != 2 {
		t.Fatalf("JSON form: %+v", a)
	}
}
