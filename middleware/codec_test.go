package middleware

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fieldsOf lists the header fields of a decoded response.
func fieldsOf(s stored) []string {
	var out []string
	s.eachField(func(name, value string) { out = append(out, name, value) })
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	big := strings.Repeat("v", 300) // lengths past one varint byte
	for _, c := range []struct {
		name   string
		status int
		flags  byte
		fields []string
		body   []byte
	}{
		{"empty", 200, 0, nil, nil},
		{"created", 201, 0, []string{"Content-Type", "application/json", "Location", "/p/1", "Link", "<a>", "Link", "<b>"}, []byte(`{"id":1}`)},
		{"long values", 200, 0, []string{"Etag", big}, bytes.Repeat([]byte{0, 1, 2, 0xff}, 5000)},
		{"empty value", 204, 0, []string{"Content-Language", ""}, nil},
		{"streamed", 200, flagStreamed, nil, nil},
		{"oversize", 500, flagOversize, nil, nil},
		{"hijacked", 0, flagHijacked, nil, nil},
		{"status 999", 999, 0, nil, []byte("x")},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := encode(c.status, c.flags, c.fields, c.body)
			if cap(b) != len(b) {
				t.Errorf("encode allocated %d for %d bytes", cap(b), len(b))
			}
			s, err := decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if s.status != c.status || s.flags != c.flags || !bytes.Equal(s.body, c.body) {
				t.Fatalf("decoded %d %#x %q", s.status, s.flags, s.body)
			}
			if got := fieldsOf(s); !slices.Equal(got, c.fields) {
				t.Fatalf("fields %q, want %q", got, c.fields)
			}
		})
	}
}

func TestCodecRejects(t *testing.T) {
	good := encode(201, 0, []string{"Location", "/p/1"}, []byte("body"))
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"short", good[:3]},
		{"version", append([]byte{2}, good[1:]...)},
		{"flags", append([]byte{1, 0x80}, good[2:]...)},
		{"status 0", encode(0, 0, nil, nil)},
		{"status 99", encode(99, 0, nil, nil)},
		{"status 1000", encode(1000, 0, nil, nil)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clip(good), 0)},
		{"field count", []byte{1, 0, 0, 200, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		{"long varint", []byte{1, 0, 0, 200, 0x80, 0x00, 0}},
		{"CR in value", encode(200, 0, []string{"Location", "/a\r\nSet-Cookie: x"}, nil)},
		{"LF in value", encode(200, 0, []string{"Location", "/a\nb"}, nil)},
		{"NUL in value", encode(200, 0, []string{"Location", "/a\x00"}, nil)},
		{"bad name", encode(200, 0, []string{"Bad Name", "v"}, nil)},
		{"empty name", encode(200, 0, []string{"", "v"}, nil)},
		{"tombstone with body", encode(200, flagStreamed, nil, []byte("x"))},
		{"tombstone with fields", encode(200, flagOversize, []string{"Location", "/"}, nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decode(c.b); !errors.Is(err, errCodec) {
				t.Fatalf("decode: %v, want errCodec", err)
			}
		})
	}
}

// FuzzDecode checks that decode never panics and that whatever it accepts
// encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(encode(201, 0, []string{"Location", "/p/1", "Link", "<a>"}, []byte(`{"id":1}`)))
	f.Add(encode(200, flagStreamed, nil, nil))
	f.Add(encode(0, flagHijacked, nil, nil))
	f.Add([]byte{1, 0, 0, 200, 1, 1, 'A', 1, 'b', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decode(b)
		if err != nil {
			return
		}
		if again := encode(s.status, s.flags, fieldsOf(s), s.body); !bytes.Equal(again, b) {
			t.Fatalf("decode(%x) encodes back to %x", b, again)
		}
	})
}

// FuzzRoundTrip checks that every response the capture can record decodes
// to what was encoded.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint16(201), "Location", "/p/1", []byte(`{"id":1}`))
	f.Add(uint16(200), "Content-Type", "", []byte{})
	f.Fuzz(func(t *testing.T, status uint16, name, value string, body []byte) {
		if status < 100 || status > 999 || !validToken(name) || !validValue(value) {
			t.Skip()
		}
		fields := []string{name, value, name, value + "2"}
		s, err := decode(encode(int(status), 0, fields, body))
		if err != nil {
			t.Fatal(err)
		}
		if s.status != int(status) || !bytes.Equal(s.body, body) || !slices.Equal(fieldsOf(s), fields) {
			t.Fatalf("round trip changed the response")
		}
	})
}
