package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// orderBody returns a JSON order of about n bytes, its members in a
// client's order (not sorted), as an encoder writes it compactly: nested
// objects, an array of line items, strings with escapes and non-ASCII
// text, integers, decimals and a trace_id (which the default deny-list
// drops) at a fixed place for varying to rewrite.
func orderBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"ord_3NfL0x2eZvKYlo2C","trace_id":"4bf92f35","amount":129900,"currency":"eur","livemode":false,` +
		`"customer":{"name":"Zoë Müller","email":"zoe@example.com","address":{"line1":"Hauptstraße 5","city":"Köln","postal_code":"50667","country":"DE"}},` +
		`"description":"Order \"A-17\" — café\nsecond line","metadata":{"channel":"web","campaign":"spring-24"},"items":[`)
	for i := 0; b.Len() < n-60; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%05d","name":"Item %d – %s","quantity":%d,"unit_amount":%d.%02d,"tax_rate":0.19,"gift":%t,"note":"line %d, gift wrap ☺"}`,
			i, i, [...]string{"Tasse", "Teller", "Besteck", "Glas"}[i%4], i%5+1, 3+i%97, 1+i%99, i%2 == 0, i)
	}
	b.WriteString(`],"shipping_rate":"shr_1Nf"}`)
	return []byte(b.String())
}

// forms returns body as the three forms BenchmarkFingerprint hashes:
// compact (as written), pretty (indented by two spaces) and canonical (the
// RFC 8785 form).
func forms(tb testing.TB, body []byte) map[string][]byte {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, body, "", "  "); err != nil {
		tb.Fatal(err)
	}
	canonical, err := fingerprint.Canonicalize(body)
	if err != nil {
		tb.Fatal(err)
	}
	return map[string][]byte{"compact": body, "pretty": pretty.Bytes(), "canonical": canonical}
}

// rewriter returns a copy of body and a function that rewrites the eight
// hex digits of its trace_id on each call, so that every iteration hashes
// bytes not seen before (no memo of recent inputs answers).
func rewriter(tb testing.TB, body []byte) ([]byte, func()) {
	b := bytes.Clone(body)
	at := bytes.Index(b, []byte(`"4bf92f35"`)) + 1
	if at == 0 {
		tb.Fatal("a body without its trace_id")
	}
	var n uint32
	const digits = "0123456789abcdef"
	return b, func() {
		n++
		for i := range 8 {
			b[at+i] = digits[n>>(28-4*i)&15]
		}
	}
}

// BenchmarkFingerprint measures what a new JSON body costs to fingerprint
// with the default Builder (validate, drop the default deny-list's fields,
// canonicalize, hash), next to its floor, a SHA-256 of the same raw bytes
// (impl=floor): the least any fingerprint of the body costs; impl=scan is
// the Builder's canonical form alone (Builder.Canonicalize: the same work
// less the hash, plus a copy of the output), what stands between idem and
// its floor. Bodies of 1
// KiB and 64 KiB, compact (members in a client's order), pretty (indented)
// and canonical already; every iteration rewrites eight bytes of the body
// first, in both implementations.
func BenchmarkFingerprint(b *testing.B) {
	fb := must.Get(fingerprint.New())(b)
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}} {
		fs := forms(b, orderBody(size.n))
		for _, form := range []string{"compact", "pretty", "canonical"} {
			body, next := rewriter(b, fs[form])
			for _, impl := range []string{"idem", "scan", "floor"} {
				b.Run("op=sum/size="+size.name+"/form="+form+"/impl="+impl, func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						next()
						switch impl {
						case "floor":
							_ = sha256.Sum256(body)
							continue
						case "scan":
							if _, err := fb.Canonicalize(body); err != nil {
								b.Fatal(err)
							}
							continue
						}
						if _, err := fb.Sum(body); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkHTTPBody sends a 1 MiB JSON body with a fresh Idempotency-Key
// through a guard in process (httptest recorder, no network) to a handler
// that drains it and answers 201, over one Store on memlayer:
//
//	impl=idem  the middleware (fingerprint of the canonical body)
//	impl=peer  the shape of a middleware that hashes the raw body: read it
//	           into one buffer of its size, SHA-256 it, Store.Do with that
//	           fingerprint, the handler's answer recorded and written out
//
// so that the ratio is what the canonical fingerprint and the middleware's
// own work cost a large body beyond reading and hashing it.
func BenchmarkHTTPBody(b *testing.B) {
	mem := must.Get(memlayer.New())(b)
	store := must.Get(tiered.New(tiered.WithSQL(mem), tiered.WithLocalCache(0, 0, 0)))(b)
	b.Cleanup(func() { _ = store.Close() })
	handler := http.HandlerFunc(chargeHandler)
	guarded := must.Get(middleware.New(store, middleware.WithSingleTenant(), middleware.WithBodyLimit(2<<20)))(b)(handler)
	peer := rawHashPeer(store, handler)
	body := orderBody(1 << 20)
	for _, impl := range []string{"idem", "peer"} {
		h := guarded
		if impl == "peer" {
			h = peer
		}
		b.Run("op=first/size=1MiB/impl="+impl, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/charges", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "body-"+freshKey().Hex())
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// rawHashPeer is BenchmarkHTTPBody's impl=peer: a guard that fingerprints
// the raw bytes of the body with SHA-256 and runs next under store.Do.
func rawHashPeer(store *tiered.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 0, max(r.ContentLength, 0)+1)
		for {
			n, err := r.Body.Read(body[len(body):cap(body)])
			body = body[:len(body)+n]
			if err != nil {
				break
			}
			if len(body) == cap(body) {
				body = append(body, 0)[:len(body)]
			}
		}
		sum := sha256.Sum256(body)
		key := idem.NewKey("", r.Header.Get("Idempotency-Key"))
		res, err := store.Do(r.Context(), key, hex.EncodeToString(sum[:]), func(context.Context) ([]byte, error) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			return rec.Body.Bytes(), nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(res.Value)
	})
}
