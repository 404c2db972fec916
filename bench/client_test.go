package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemkit/idem/client"
)

// BenchmarkClient puts the client Transport next to a plain http.Client on
// the success path: a ~1 KiB JSON POST answered 201 at once by the bare
// handler over loopback HTTP, keep-alive, one connection pool shared by
// both.
//
//	impl=plain  the http.Client sends the request with an Idempotency-Key
//	            the caller made (client.NewKey), as a careful caller would
//	impl=idem   the same client over client.New: the Transport mints the
//	            key, keeps the body replayable (GetBody) and bounds the
//	            attempt, and hands back the answer
func BenchmarkClient(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(chargeHandler))
	b.Cleanup(srv.Close)
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(base.CloseIdleConnections)
	tr, err := client.New(base)
	if err != nil {
		b.Fatal(err)
	}
	for _, impl := range []struct {
		name  string
		c     *http.Client
		keyed bool // the caller sets the key itself
	}{
		{"plain", &http.Client{Transport: base}, true},
		{"idem", &http.Client{Transport: tr}, false},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", bytes.NewReader(payment))
					req.Header.Set("Content-Type", "application/json")
					if impl.keyed {
						req.Header.Set("Idempotency-Key", client.NewKey())
					}
					resp, err := impl.c.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
