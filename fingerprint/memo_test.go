package fingerprint

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// memoBodies returns n distinct JSON bodies, more than the memo has slots
// when n > memoSlots, so that entries collide and replace each other.
func memoBodies(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"order": %d, "items": [{"sku": "A-%d", "qty": %d}], "trace_id": "t%d"}`, i, i%7, i%3+1, i)
	}
	return out
}

// TestMemoAnswersAsTheCanonicalPath checks every answer of a Builder whose
// memo is full and colliding, from many goroutines, against digests
// computed once each by another Builder (every one of them a miss there,
// so canonicalized).
func TestMemoAnswersAsTheCanonicalPath(t *testing.T) {
	bodies := memoBodies(memoSlots + memoSlots/2)
	ref, b := newBuilder(t), newBuilder(t)
	want := make([]string, len(bodies))
	for i, body := range bodies {
		var err error
		if want[i], err = ref.Sum(body); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 3 {
				for j := range bodies {
					i := (j*7 + g*1000 + round) % len(bodies)
					got, err := b.Sum(bodies[i])
					if err != nil || got != want[i] {
						t.Errorf("body %d: %q, %v; want %q", i, got, err, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestMemoKeepsRequestsApart sends the same bytes in requests that differ in
// one other part each, alternately, through one Builder: a memo keyed on
// less than the whole input would answer one with the other's digest.
func TestMemoKeepsRequestsApart(t *testing.T) {
	b, ref := newBuilder(t, WithHeaders("X-Tenant")), newBuilder(t, WithHeaders("X-Tenant"))
	const body = `{"amount": 100, "currency": "EUR"}`
	type req struct{ method, target, ct, tenant, enc string }
	reqs := []req{
		{"POST", "/pay", "application/json", "a", ""},
		{"PUT", "/pay", "application/json", "a", ""},
		{"POST", "/refund", "application/json", "a", ""},
		{"POST", "/pay?x=1", "application/json", "a", ""},
		{"POST", "/pay", "application/merge-patch+json", "a", ""},
		{"POST", "/pay", "text/plain", "a", ""},
		{"POST", "/pay", "application/json", "b", ""},
		{"POST", "/pay", "application/json", "a", "gzip"},
	}
	mk := func(r req) (digest string, err error) {
		hr := httptest.NewRequest(r.method, r.target, strings.NewReader(body))
		hr.Header.Set("Content-Type", r.ct)
		hr.Header.Set("X-Tenant", r.tenant)
		if r.enc != "" {
			hr.Header.Set("Content-Encoding", r.enc)
		}
		return b.RequestBody(hr, []byte(body))
	}
	seen := map[string]int{}
	for round := range 3 {
		for i, r := range reqs {
			got, err := mk(r)
			if err != nil {
				t.Fatal(err)
			}
			hr := httptest.NewRequest(r.method, r.target, nil)
			hr.Header.Set("Content-Type", r.ct)
			hr.Header.Set("X-Tenant", r.tenant)
			if r.enc != "" {
				hr.Header.Set("Content-Encoding", r.enc)
			}
			want, err := ref.RequestBody(hr, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("round %d, request %+v: %s, want %s", round, r, got, want)
			}
			if j, ok := seen[got]; ok && j != i {
				t.Fatalf("requests %+v and %+v share digest %s", reqs[j], r, got)
			}
			seen[got] = i
		}
	}
}

// TestMemoAnswersRepeats shows the memo at work: a repeated body costs no
// allocation, where a new one costs the digest string and the memo entry.
func TestMemoAnswersRepeats(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	b := newBuilder(t)
	r := httptest.NewRequest("POST", "/orders", nil)
	r.Header.Set("Content-Type", "application/json")
	body := []byte(`{"amount": 1999, "currency": "EUR", "customer": {"id": "cus_42"}}`)
	if _, err := b.RequestBody(r, body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = b.RequestBody(r, body) }); n != 0 {
		t.Errorf("a repeated body: %v allocations, want 0 (the memo's answer)", n)
	}
	bodies := memoBodies(200)
	i := 0
	if n := testing.AllocsPerRun(100, func() { i++; _, _ = b.RequestBody(r, bodies[i]) }); n < 1 {
		t.Errorf("new bodies: %v allocations, want at least the digest", n)
	}
}

// TestMemoWaitsForASecondCall: a Builder made for one call costs no memo.
func TestMemoWaitsForASecondCall(t *testing.T) {
	b := newBuilder(t)
	body := []byte(`{"a": 1}`)
	first, err := b.Sum(body)
	if err != nil {
		t.Fatal(err)
	}
	if b.memo.Load() != nil {
		t.Fatal("the memo exists after one call")
	}
	for range 2 {
		if again, err := b.Sum(body); err != nil || again != first {
			t.Fatalf("%q, %v; want %q", again, err, first)
		}
	}
	if b.memo.Load() == nil {
		t.Fatal("no memo after three calls")
	}
}

// TestMemoFromTheSecondSighting: a body seen once costs no SHA-256 and
// leaves no memo entry; its first repeat is remembered, and answers the
// next.
func TestMemoFromTheSecondSighting(t *testing.T) {
	b := newBuilder(t)
	for _, warm := range memoBodies(2) {
		if _, err := b.Sum(warm); err != nil {
			t.Fatal(err)
		}
	}
	m := b.memo.Load()
	if m == nil {
		t.Fatal("no memo after two calls")
	}
	body := []byte(`{"amount": 1999, "currency": "EUR", "trace_id": "t1"}`)
	w := getWork()
	k := w.memoKey(nil, bodyJSON, jsonType, "", body)
	putWork(w)
	want, err := b.Sum(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.get(&k); ok {
		t.Fatal("a body seen once is in the memo")
	}
	if got, err := b.Sum(body); err != nil || got != want {
		t.Fatalf("first repeat: %q, %v; want %q", got, err, want)
	}
	if got, ok := m.get(&k); !ok || got != want {
		t.Fatalf("after its first repeat: %q, %v in the memo; want %q", got, ok, want)
	}
	if got, err := b.Sum(body); err != nil || got != want {
		t.Fatalf("second repeat: %q, %v; want %q", got, err, want)
	}
}
