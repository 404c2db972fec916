package tiered_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// Behind the HTTP middleware, an atomic Store's handler finds the
// transaction on its request context: a 201 commits its row with the
// stored response (the retry replays it, byte for byte, on another
// instance); a 500 rolls its row back, and the retry runs.
func TestAtomicBehindTheMiddleware(t *testing.T) {
	eachAtomicRig(t, func(t *testing.T, r *atomicRig) {
		runs := 0
		handler := func(w http.ResponseWriter, req *http.Request) {
			runs++
			id := req.Header.Get("Idempotency-Key")
			if err := r.charge(req.Context(), id); err != nil {
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
			if strings.HasPrefix(id, "fail") && runs == 1 {
				http.Error(w, "card processor down", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"charge":"` + id + `"}`))
		}
		serve := func(s *tiered.Store, id string) *httptest.ResponseRecorder {
			mw, err := middleware.New(s, middleware.WithSingleTenant())
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
			req.Header.Set("Idempotency-Key", id)
			rec := httptest.NewRecorder()
			mw(http.HandlerFunc(handler)).ServeHTTP(rec, req)
			return rec
		}
		a, b := r.store(t), r.store(t, tiered.WithLocalCache(0, 0, 0))
		for _, tc := range []struct {
			id            string
			first, second int
			runs          int
		}{
			{id: "ok-" + newKey(t).String()[:16], first: http.StatusCreated, second: http.StatusCreated, runs: 1},
			{id: "fail-" + newKey(t).String()[:16], first: http.StatusInternalServerError, second: http.StatusCreated, runs: 2},
		} {
			runs = 0
			first := serve(a, tc.id)
			if first.Code != tc.first {
				t.Fatalf("%s: first answer %d %s, want %d", tc.id, first.Code, first.Body, tc.first)
			}
			wantRows := 1
			if tc.first != http.StatusCreated {
				wantRows = 0
			}
			if n := r.rows(t, tc.id); n != wantRows {
				t.Fatalf("%s: %d rows after the first answer, want %d", tc.id, n, wantRows)
			}
			second := serve(b, tc.id)
			if second.Code != tc.second || second.Body.String() != `{"charge":"`+tc.id+`"}` {
				t.Fatalf("%s: retry %d %s", tc.id, second.Code, second.Body)
			}
			if tc.first == http.StatusCreated && first.Body.String() != second.Body.String() {
				t.Fatalf("%s: replay %q differs from the first answer %q", tc.id, second.Body, first.Body)
			}
			if runs != tc.runs || r.rows(t, tc.id) != 1 {
				t.Fatalf("%s: handler ran %d times, %d rows; want %d runs, 1 row", tc.id, runs, r.rows(t, tc.id), tc.runs)
			}
		}
	})
}
