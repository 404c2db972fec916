package middleware_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/internal/testkit/must"
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

// BenchmarkPayment runs each path, with the same request construction and
// recorder, through three stacks, so that benchstat -col /stack gives the
// ratios, for a realistic handler (handler=decode) and a minimal one
// (handler=drain):
//
//	bare     the handler alone
//	minimal  the handler behind minimalIdem, the least work any
//	         idempotency middleware does (see there)
//	idem     the handler behind this package's middleware
//
// and the paths are
//
//	first   a new key every iteration: claim, run, record, complete
//	replay  the same key every iteration: a completed response, replayed
//	nokey   no key: passed through untouched
//
// The Store runs on a memory layer, so the numbers are the middleware's
// and the Store's own cost, not a network's.
func BenchmarkPayment(b *testing.B) {
	for _, handler := range []struct {
		name string
		h    http.Handler
	}{{"decode", benchDecode}, {"drain", benchDrain}} {
		for _, path := range []string{"first", "replay", "nokey"} {
			for _, stack := range []string{"bare", "minimal", "idem"} {
				b.Run("handler="+handler.name+"/path="+path+"/stack="+stack, func(b *testing.B) {
					// Each run starts from an empty store and a collected
					// heap, so that no run pays for the records an earlier
					// one kept.
					h := handler.h
					switch stack {
					case "minimal":
						h = minimalIdem(h)
					case "idem":
						store, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(b)))
						if err != nil {
							b.Fatal(err)
						}
						defer store.Close()
						h = must.Get(middleware.New(store, middleware.WithSingleTenant()))(b)(h)
					}
					runtime.GC()
					benchPath(b, h, path, "bench-"+handler.name+"-"+stack+"-")
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

// minimalIdem is the reference stack=minimal: the least work an
// idempotency middleware can do on these paths, and nothing more. It reads
// the body, hashes its raw bytes with SHA-256, looks the key up in a map
// under a mutex, records the response while passing it on, and replays a
// recorded one. It does not canonicalize the body, wait for or refuse a
// concurrent duplicate properly, lease, renew, release on failure, bound
// sizes, filter headers or outlive the process: it is not a usable
// middleware. It measures what this harness charges any middleware that
// keys, hashes and records at all, so that the ratio idem/minimal is the
// cost of what idem does beyond that.
func minimalIdem(next http.Handler) http.Handler {
	type recorded struct {
		fp     [sha256.Size]byte
		done   bool
		status int
		header [][2]string
		body   []byte
	}
	var (
		mu   sync.Mutex
		keys = make(map[string]*recorded)
	)
	kept := []string{"Content-Type", "Location"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		// One allocation of the body's size: io.ReadAll and bytes.Buffer
		// allocate more, which would make this reference heavier and so
		// flatter the ratio idem/minimal.
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
		fp := sha256.Sum256(body)
		mu.Lock()
		e, seen := keys[key]
		if !seen {
			e = &recorded{fp: fp}
			keys[key] = e
		}
		done := e.done
		mu.Unlock()
		switch {
		case seen && e.fp != fp:
			http.Error(w, "key reused with another request", http.StatusUnprocessableEntity)
			return
		case seen && !done:
			http.Error(w, "in progress", http.StatusConflict)
			return
		case seen:
			for _, kv := range e.header {
				w.Header().Set(kv[0], kv[1])
			}
			w.WriteHeader(e.status)
			_, _ = w.Write(e.body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rw := &minimalRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rw, r)
		var header [][2]string
		for _, name := range kept {
			if v := w.Header().Get(name); v != "" {
				header = append(header, [2]string{name, v})
			}
		}
		mu.Lock()
		e.done, e.status, e.header, e.body = true, rw.status, header, rw.body
		mu.Unlock()
	})
}

// minimalRecorder is minimalIdem's recording writer.
type minimalRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   []byte
}

func (m *minimalRecorder) WriteHeader(code int) {
	if !m.wrote {
		m.wrote, m.status = true, code
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *minimalRecorder) Write(p []byte) (int, error) {
	m.wrote = true
	m.body = append(m.body, p...)
	return m.ResponseWriter.Write(p)
}
