package idemwatermill

import (
	"bytes"
	"maps"
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

func msg(uuid string, payload []byte, md ...string) *message.Message {
	m := message.NewMessage(uuid, payload)
	for i := 0; i+1 < len(md); i += 2 {
		m.Metadata.Set(md[i], md[i+1])
	}
	return m
}

// sameMessages reports whether got are want, byte for byte: UUID,
// metadata keys and values, payload.
func sameMessages(got, want []*message.Message) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].UUID != want[i].UUID || !bytes.Equal(got[i].Payload, want[i].Payload) ||
			!maps.Equal(got[i].Metadata, want[i].Metadata) || len(got[i].Metadata) != len(want[i].Metadata) {
			return false
		}
	}
	return true
}

// The recorded messages decode byte for byte as the handler made them:
// invalid UTF-8 and binary in metadata keys and values, in the UUID, in
// the payload.
func TestCodecByteExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []*message.Message
	}{
		{"plain", []*message.Message{msg("u-1", []byte(`{"a":1}`), "k", "v")}},
		{"binary metadata value", []*message.Message{msg("u-1", nil, "trace", "\xff\xfe\x00\x01")}},
		{"invalid UTF-8 key", []*message.Message{msg("u-1", []byte("x"), "name\xc3", "v", "name", "w")}},
		{"binary UUID and payload", []*message.Message{msg("\xff\x00uuid", []byte{0, 0xff, 0xfe, '\n'})}},
		{"empty parts", []*message.Message{msg("", nil), msg("u-2", []byte{}, "", "")}},
		{"many", []*message.Message{msg("a", []byte("1"), "x", "1", "y", "2"), msg("b", []byte("2")), msg("c", nil, "z", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := encode(tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the first delivery and a replay
				got, err := decode(enc)
				if err != nil {
					t.Fatal(err)
				}
				if !sameMessages(got, tc.msgs) {
					t.Fatalf("decoded %#v, want %#v", got, tc.msgs)
				}
			}
			again, err := encode(tc.msgs)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("a second encoding differs (%v): one set of messages must have one record", err)
			}
		})
	}
}

// A record written by the first releases (JSON after "idemwatermill/1")
// still decodes: a rolling upgrade replays what the old version recorded.
func TestCodecDecodesTheJSONForm(t *testing.T) {
	old := []byte("idemwatermill/1\n" +
		`[{"uuid":"u-1","metadata":{"k":"v","trace":"abc"},"payload":"eyJhIjoxfQ=="},{"uuid":"u-2","payload":null}]`)
	got, err := decode(old)
	if err != nil {
		t.Fatal(err)
	}
	want := []*message.Message{msg("u-1", []byte(`{"a":1}`), "k", "v", "trace", "abc"), msg("u-2", nil)}
	if !sameMessages(got, want) {
		t.Fatalf("decoded %#v, want %#v", got, want)
	}
	if _, err := decode([]byte("idemwatermill/1\n{")); err == nil {
		t.Fatal("a broken JSON record decoded")
	}
}

// A result that is not the middleware's produced nothing; one that starts
// like it and is cut short or padded is refused, never half-decoded.
func TestCodecRefusesCorruptRecords(t *testing.T) {
	if got, err := decode([]byte("the caller's own bytes")); got != nil || err != nil {
		t.Fatalf("foreign result: %v, %v; want nothing", got, err)
	}
	enc, err := encode([]*message.Message{msg("u-1", []byte("payload"), "k", "v")})
	if err != nil {
		t.Fatal(err)
	}
	for cut := len(magic); cut < len(enc); cut++ {
		if _, err := decode(enc[:cut]); err == nil {
			t.Fatalf("the record cut at %d of %d bytes decoded", cut, len(enc))
		}
	}
	if _, err := decode(append(bytes.Clone(enc), 0)); err == nil {
		t.Fatal("a record with a trailing byte decoded")
	}
}

// A decoded message's payload is its own: changing it changes neither the
// record nor the next replay.
func TestCodecDecodedPayloadIsACopy(t *testing.T) {
	enc, err := encode([]*message.Message{msg("u-1", []byte("abc"))})
	if err != nil {
		t.Fatal(err)
	}
	first, err := decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	first[0].Payload[0] = 'X'
	second, err := decode(enc)
	if err != nil || string(second[0].Payload) != "abc" {
		t.Fatalf("the replay after a change: %q, %v", second[0].Payload, err)
	}
}

// FuzzCodec: any produced messages round-trip byte for byte, and no bytes
// after the magic make decode panic.
func FuzzCodec(f *testing.F) {
	f.Add("u-1", "trace", "\xff\xfe\x00\x01", []byte("payload"), "name\xc3", "v")
	f.Add("", "", "", []byte(nil), "k", "")
	f.Fuzz(func(t *testing.T, uuid, k1, v1 string, payload []byte, k2, v2 string) {
		msgs := []*message.Message{msg(uuid, payload, k1, v1, k2, v2), msg(v1, []byte(k2))}
		enc, err := encode(msgs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMessages(got, msgs) {
			t.Fatalf("decoded %#v, want %#v", got, msgs)
		}
		// Arbitrary bytes after the magic: an error or messages, never a
		// panic.
		_, _ = decode(append(bytes.Clone(magic), payload...))
	})
}

// goldenRecord is a record of the byte-exact form, kept in testdata: the
// form is a stored format (records outlive a release), and readers outside
// this module (the idem command's get) decode the same file, so a change
// to the form fails here first.
const goldenRecord = "testdata/record-v2.bin"

func TestCodecGoldenRecord(t *testing.T) {
	got, err := encode([]*message.Message{
		msg("u-1", []byte(`{"charged":100}`), "name\xc3", "v", "trace", "\xff\xfe\x00\x01"),
		msg("u-2", []byte{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(goldenRecord)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the record's form changed: encode gives %q, %s holds %q; a stored format changes with a new magic, and its readers with it", got, goldenRecord, want)
	}
}
