package fingerprint_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem/fingerprint"
)

func requestFP(t *testing.T, b *fingerprint.Builder, contentType, encoding, body string) (string, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	return b.Request(r)
}

// WithJSONBodies reads a body as JSON whatever its Content-Type: JSON sent
// as text/plain, as curl -d's form type or with no type at all is the
// same request as the same JSON sent as application/json, a noisy field
// included; without it, such bodies count as their bytes.
func TestJSONBodies(t *testing.T) {
	on, err := fingerprint.New(fingerprint.WithJSONBodies(true))
	if err != nil {
		t.Fatal(err)
	}
	off, err := fingerprint.New()
	if err != nil {
		t.Fatal(err)
	}
	want, err := requestFP(t, on, "application/json", "", `{"amount":100,"timestamp":"2026-12-01T10:00:00Z"}`)
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := requestFP(t, off, "application/json", "", `{"amount":100,"timestamp":"2026-12-01T10:00:00Z"}`); plain != want {
		t.Fatal("the option changed the fingerprint of a body sent as application/json")
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "", "application/octet-stream"} {
		got, err := requestFP(t, on, ct, "", `{ "timestamp":"2026-12-01T10:00:09Z", "amount":100 }`)
		if err != nil || got != want {
			t.Errorf("%q with the option: %s, %v; want the application/json fingerprint", ct, got, err)
		}
		a, _ := requestFP(t, off, ct, "", `{"amount":100,"timestamp":"2026-12-01T10:00:00Z"}`)
		b, _ := requestFP(t, off, ct, "", `{"amount":100,"timestamp":"2026-12-01T10:00:09Z"}`)
		if a == b {
			t.Errorf("%q without the option: a new timestamp kept the fingerprint, want the bytes to count", ct)
		}
	}
	if _, err := requestFP(t, on, "text/plain", "", "hello"); !errors.Is(err, fingerprint.ErrInvalidJSON) {
		t.Errorf("a body that is not JSON: %v, want ErrInvalidJSON", err)
	}
	gz1, err1 := requestFP(t, on, "application/json", "gzip", "\x1f\x8b one")
	gz2, err2 := requestFP(t, on, "application/json", "gzip", "\x1f\x8b two")
	if err1 != nil || err2 != nil || gz1 == gz2 {
		t.Errorf("an encoded body: %s %v, %s %v; want its bytes to count", gz1, err1, gz2, err2)
	}
	if a, _ := requestFP(t, on, "text/plain", "", ""); a == want {
		t.Error("an empty body took a JSON body's fingerprint")
	}
}
