package middleware_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// benchPayment is a ~1 KiB JSON payment, with the noisy fields a client
// sends (request_id, timestamp) that the default fingerprint leaves out.
var benchPayment = []byte(`{
  "amount": 129900,
  "currency": "EUR",
  "description": "Order #100234 - 3 items, express shipping",
  "request_id": "req_01HZX9K2M8Q4T6V8W0Y2A4C6E8",
  "timestamp": "2026-03-14T09:26:53.589Z",
  "customer": {
    "id": "cus_9f8e7d6c5b4a",
    "email": "ada.lovelace@example.com",
    "name": "Ada Lovelace",
    "phone": "+44 20 7946 0958",
    "address": {"line1": "12 Analytical Row", "line2": "Flat 3", "city": "London", "postal_code": "NW1 6XE", "country": "GB"}
  },
  "payment_method": {"type": "card", "card": {"brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2029, "fingerprint": "Xt5EWLLDS7FJjR1c"}},
  "items": [
    {"sku": "BK-ENG-001", "name": "Notes on the Analytical Engine", "quantity": 1, "unit_amount": 49900},
    {"sku": "PN-BRS-014", "name": "Brass punch-card set", "quantity": 2, "unit_amount": 30000},
    {"sku": "SH-EXP-002", "name": "Express shipping", "quantity": 1, "unit_amount": 20000}
  ],
  "metadata": {"order_id": "100234", "channel": "web", "campaign": "spring-sale", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
  "capture": true,
  "statement_descriptor": "IDEMKIT SHOP"
}`)

type benchOrder struct {
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
	Customer    struct {
		ID, Email, Name string
	} `json:"customer"`
	Items []struct {
		SKU        string `json:"sku"`
		Quantity   int    `json:"quantity"`
		UnitAmount int64  `json:"unit_amount"`
	} `json:"items"`
	Metadata map[string]string `json:"metadata"`
}

type benchReceipt struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Items    int    `json:"items"`
}

// benchDecode is a realistic bare handler: what a payment endpoint does
// without idempotency — decode the order, answer 201 with a receipt.
var benchDecode = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	var o benchOrder
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/pay_3MtwBwLkdIwHu7ix")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(benchReceipt{ID: "pay_3MtwBwLkdIwHu7ix", Status: "succeeded", Amount: o.Amount, Currency: o.Currency, Items: len(o.Items)})
})

// benchKeys numbers first-execution keys across every run of a benchmark
// (-count), so that a key is never seen twice.
var benchKeys atomic.Int64

// benchDrain is a minimal bare handler: it drains the body and answers a
// fixed receipt, so that the middleware's cost is not hidden behind the
// handler's.
var benchDrain = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/pay_3MtwBwLkdIwHu7ix")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"pay_3MtwBwLkdIwHu7ix","status":"succeeded","amount":129900,"currency":"EUR","items":3}`)
})

// BenchmarkPayment runs each path through the middleware (stack=idem) and,
// with the same request construction and recorder, straight to the bare
// handler (stack=bare), so that benchstat -col /stack gives the ratio, for
// a realistic handler (handler=decode) and a minimal one (handler=drain):
//
//	first   a new key every iteration: claim, run, record, complete
//	replay  the same key every iteration: a completed response, replayed
//	nokey   no key: passed through untouched
//
// The Store runs on a memory layer, so the numbers are the middleware's
// and the Store's own cost, not a network's.
func BenchmarkPayment(b *testing.B) {
	store, err := tiered.New(tiered.WithSQL(memlayer.New()))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	for _, handler := range []struct {
		name string
		h    http.Handler
	}{{"decode", benchDecode}, {"drain", benchDrain}} {
		idem := middleware.New(store)(handler.h)
		for _, path := range []string{"first", "replay", "nokey"} {
			for _, stack := range []struct {
				name string
				h    http.Handler
			}{{"bare", handler.h}, {"idem", idem}} {
				b.Run("handler="+handler.name+"/path="+path+"/stack="+stack.name, func(b *testing.B) {
					benchPath(b, stack.h, path, "bench-"+handler.name+"-"+stack.name+"-")
				})
			}
		}
	}
}

func benchPath(b *testing.B, h http.Handler, path, keyPrefix string) {
	b.ReportAllocs()
	keyBuf := []byte(keyPrefix)
	prefix := len(keyBuf)
	// A new payment is new bytes: each first execution gets its own
	// request_id (a field the fingerprint leaves out), as clients send, so
	// that no fingerprint is answered from the memo of recent bodies. A
	// replay repeats the bytes, as a client's retry does.
	body := bytes.Clone(benchPayment)
	rid := bytes.Index(body, []byte("req_01HZX9K2M8Q4T6V8W0Y2A4C6E8"))
	for b.Loop() {
		if path == "first" {
			n := benchKeys.Add(1)
			for i := range 12 {
				body[rid+len("req_01HZX9K2M8Q4T6V8W0Y2A4C6E8")-1-i] = "0123456789ABCDEF"[n>>(4*i)&15]
			}
			keyBuf = strconv.AppendInt(keyBuf[:prefix], n, 10)
		}
		req := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		switch path {
		case "first":
			req.Header.Set("Idempotency-Key", string(keyBuf))
		case "replay":
			req.Header.Set("Idempotency-Key", keyPrefix+"replay")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
