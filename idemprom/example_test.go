package idemprom_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// One Collector hears the Store (tiered.WithObserver) and the middleware's
// answers (middleware.WithAnswerObserver); register it once.
func Example() {
	metrics, err := idemprom.New()
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	layer, err := memlayer.New()
	if err != nil {
		panic(err)
	}
	store, err := tiered.New(tiered.WithSQL(layer), tiered.WithObserver(metrics))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	mw, err := middleware.New(store, middleware.WithSingleTenant(), middleware.WithAnswerObserver(metrics))
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	for _, body := range []string{`{"amount":1}`, `{"amount":1}`, `{"amount":2}`} {
		req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	n, _ := testutil.GatherAndCount(reg, "idem_http_answers_total")
	fmt.Println("answer series:", n)
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP idem_http_answers_total The HTTP middleware's answers by kind (passed, executed, replayed, problem), problem (key_missing, key_malformed, body_invalid, body_too_large, in_flight, mismatch, unavailable, not_replayable, scope_missing, failed; empty for the other kinds) and status code (empty for passed).
# TYPE idem_http_answers_total counter
idem_http_answers_total{answer="executed",code="201",problem=""} 1
idem_http_answers_total{answer="problem",code="422",problem="mismatch"} 1
idem_http_answers_total{answer="replayed",code="201",problem=""} 1
`), "idem_http_answers_total")
	fmt.Println("as expected:", err == nil)
	// Output:
	// answer series: 3
	// as expected: true
}
