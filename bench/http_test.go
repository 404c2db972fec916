package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
)

// payment is a ~1 KiB JSON payment request.
var payment = []byte(`{"amount":4200,"currency":"EUR","customer":"cus_9s8d7f6g5h4j","description":"Order #100234 — 3 items",` +
	`"payment_method":{"type":"card","card":{"brand":"visa","last4":"4242","exp_month":12,"exp_year":2030,"fingerprint":"Xt5EWLLDS7FJjR5c"}},` +
	`"shipping":{"name":"Ada Lovelace","phone":"+44 20 7946 0958","address":{"line1":"12 St James's Square","line2":"Flat 3","city":"London","postal_code":"SW1Y 4JH","country":"GB"}},` +
	`"items":[{"sku":"BK-001","name":"Notes on the Analytical Engine","quantity":1,"unit_amount":2500},{"sku":"PN-17","name":"Fountain pen","quantity":2,"unit_amount":700},{"sku":"IN-02","name":"Ink, blue-black","quantity":1,"unit_amount":300}],` +
	`"metadata":{"order_id":"100234","channel":"web","campaign":"winter-2026","affiliate":"none","notes":"leave with the concierge"},` +
	`"timestamp":"2026-11-30T10:00:00.000Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","request_id":"req_8f7e6d5c4b3a2910"}`)

func chargeHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/charges/ch_1")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(result)
}

// BenchmarkHTTP puts the middleware (over a Redis+SQL Store) next to the bare
// handler, both served over loopback HTTP with a keep-alive client and a
// ~1 KiB JSON payment body.
//
//	op=first   a new Idempotency-Key on every request: the handler runs
//	op=replay  the same key every time: the stored response is replayed
//	op=nokey   no key: the middleware passes the request through
//
// The baseline of each is the bare handler serving the same request.
func BenchmarkHTTP(b *testing.B) {
	st := newStack(b)
	store := st.store(b)
	bare := httptest.NewServer(http.HandlerFunc(chargeHandler))
	guarded := httptest.NewServer(must.Get(middleware.New(store, middleware.WithSingleTenant()))(b)(http.HandlerFunc(chargeHandler)))
	b.Cleanup(bare.Close)
	b.Cleanup(guarded.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)

	send := func(b *testing.B, url, key string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/charges", bytes.NewReader(payment))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Errorf("status %d", resp.StatusCode)
		}
	}
	replayKey := "replay-" + strconv.FormatInt(keySeq.Add(1), 36)
	send(b, guarded.URL, replayKey)
	for _, n := range goroutines {
		for _, op := range []string{"first", "replay", "nokey"} {
			key := func() string {
				switch op {
				case "first":
					return "first-" + strconv.FormatInt(keySeq.Add(1), 36)
				case "replay":
					return replayKey
				}
				return ""
			}
			b.Run(name(op, n, "baseline"), func(b *testing.B) { parallel(b, n, func() { send(b, bare.URL, key()) }) })
			b.Run(name(op, n, "idem"), func(b *testing.B) { parallel(b, n, func() { send(b, guarded.URL, key()) }) })
		}
	}
}
