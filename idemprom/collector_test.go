package idemprom_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/janitor"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/tiered"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollectorCountsStoreCallsAndEvents(t *testing.T) {
	c := must.Get(idemprom.New())(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := idem.NewKey("t", "k")
	fn := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	for range 3 {
		if _, err := s.Do(t.Context(), k, "fp", fn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Do(t.Context(), k, "other", fn); !errors.Is(err, idem.ErrMismatch) {
		t.Fatal(err)
	}
	want := `
# HELP idem_calls_total Store calls by outcome (executed, replayed, mismatch, in_flight, unavailable, pending, lease_lost, failed, not_replayable, config_error, canceled, closed, invalid) and the tier that answered; every caller counts, and a caller that waited for an execution in flight and got its result is replayed.
# TYPE idem_calls_total counter
idem_calls_total{outcome="executed",tier="sql"} 1
idem_calls_total{outcome="mismatch",tier="local"} 1
idem_calls_total{outcome="replayed",tier="local"} 2
# HELP idem_events_total idem events by kind and tier (executed, replayed, waited, in_flight, mismatch, lease_lost, takeover, tier_error, fallback_on, fallback_off, released, claimed, renewed, completed, grace, swept); tier latencies are in tier_duration_seconds.
# TYPE idem_events_total counter
idem_events_total{event="claimed",tier="sql"} 1
idem_events_total{event="completed",tier="sql"} 1
idem_events_total{event="mismatch",tier="local"} 1
idem_events_total{event="executed",tier="sql"} 1
idem_events_total{event="replayed",tier="local"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_calls_total", "idem_events_total"); err != nil {
		t.Fatal(err)
	}
	for name, series := range map[string]int{
		"idem_work_duration_seconds": 1, "idem_call_duration_seconds": 3, "idem_tier_duration_seconds": 1,
	} {
		if n := testutil.CollectAndCount(c, name); n != series {
			t.Errorf("%s: %d series, want %d", name, n, series)
		}
	}
}

// In a burst with two bodies on one key, every caller is counted — those
// that joined another's execution too — and the middleware's own answers
// are counted by problem and status: the 422s the clients received, the
// mismatches counted and the mismatch answers agree. On the real stack
// (three Stores over one Redis and one database) and the embedded one.
func TestBurstCountsEveryCaller(t *testing.T) {
	stacktest.Each(t, func(t *testing.T, st *stacktest.Stack) {
		c := must.Get(idemprom.New())(t)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		var handlers []http.Handler
		for range 3 {
			mw := must.Get(middleware.New(st.Store(t, tiered.WithObserver(c)), middleware.WithSingleTenant(), middleware.WithAnswerObserver(c)))(t)
			handlers = append(handlers, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(20 * time.Millisecond)
				w.WriteHeader(http.StatusCreated)
			})))
		}
		const n = 20
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(fmt.Sprintf(`{"amount":%d}`, i%2)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "burst")
				rec := httptest.NewRecorder()
				handlers[i%3].ServeHTTP(rec, req)
				codes[i] = rec.Code
			})
		}
		wg.Wait()
		got := map[int]int{}
		for _, code := range codes {
			got[code]++
		}
		if got[http.StatusCreated]+got[http.StatusUnprocessableEntity] != n || got[http.StatusUnprocessableEntity] == 0 {
			t.Fatalf("codes %v", got)
		}
		sum := func(name string, labels map[string]string) int {
			t.Helper()
			return int(value(t, reg, name, labels))
		}
		if calls := sum("idem_calls_total", nil); calls != n {
			t.Errorf("calls_total %d, want %d", calls, n)
		}
		if m := sum("idem_calls_total", map[string]string{"outcome": "mismatch"}); m != got[http.StatusUnprocessableEntity] {
			t.Errorf("mismatch calls %d, 422 answers %d", m, got[http.StatusUnprocessableEntity])
		}
		if m := sum("idem_http_answers_total", map[string]string{"answer": "problem", "problem": "mismatch", "code": "422"}); m != got[http.StatusUnprocessableEntity] {
			t.Errorf("mismatch answers %d, 422 answers %d", m, got[http.StatusUnprocessableEntity])
		}
		ok := sum("idem_http_answers_total", map[string]string{"answer": "executed", "code": "201"}) +
			sum("idem_http_answers_total", map[string]string{"answer": "replayed", "code": "201"})
		if ok != got[http.StatusCreated] || sum("idem_http_answers_total", map[string]string{"answer": "executed"}) != 1 {
			t.Errorf("201 answers counted %d, sent %d (one executed)", ok, got[http.StatusCreated])
		}
	})
}

// value sums the series of the metric name that carry labels.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// A Redis that cannot be reached switches the fallback gauge on; the
// Store goes on with SQL alone.
func TestFallbackGauge(t *testing.T) {
	c := must.Get(idemprom.New())(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	redisOff := func() float64 { return value(t, reg, "idem_fallback", map[string]string{"tier": "redis"}) }
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer dead.Close()
	rl := must.Get(redislayer.New(dead, redislayer.WithTimeout(100*time.Millisecond)))(t)
	defer rl.Close()
	s := must.Get(tiered.New(tiered.WithRedis(rl), tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(c)))(t)
	defer s.Close()
	for i := 0; i < 50 && redisOff() == 0; i++ {
		k := idem.NewKey("", fmt.Sprint(i))
		if _, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if v := redisOff(); v != 1 {
		t.Fatalf("fallback gauge %v after Redis failed", v)
	}
}

// The janitor's sweeps are counted in deleted rows.
func TestJanitorDeletedRows(t *testing.T) {
	c := must.Get(idemprom.New())(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	st := stacktest.Real(t)
	layer := st.SQLLayer(t)
	s := must.Get(tiered.New(tiered.WithSQL(layer), tiered.WithRetention(time.Millisecond)))(t)
	defer s.Close()
	for i := range 7 {
		if _, err := s.Do(t.Context(), idem.NewKey("", fmt.Sprint(i)), "fp", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	j := must.Get(janitor.New(layer, janitor.WithBatch(3)))(t)
	if _, _, err := j.Sweep(idem.ContextWithObserver(t.Context(), c)); err != nil {
		t.Fatal(err)
	}
	if v := value(t, reg, "idem_janitor_deleted_rows_total", nil); v != 7 {
		t.Fatalf("deleted rows %v, want 7", v)
	}
}

// Options given nonsense are one error from New that names each of them,
// where the prometheus client would panic at New or at registration.
func TestNewRefusesNonsense(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []idemprom.Option
	}{
		{"buckets out of order", []idemprom.Option{idemprom.WithBuckets(1, 0.5)}},
		{"no buckets", []idemprom.Option{idemprom.WithBuckets()}},
		{"NaN bucket", []idemprom.Option{idemprom.WithBuckets(math.NaN())}},
		{"bad namespace", []idemprom.Option{idemprom.WithNamespace("9 lives")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := idemprom.New(tc.opts...); !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
	_, err := idemprom.New(idemprom.WithBuckets(), idemprom.WithNamespace("-"))
	for _, name := range []string{"WithBuckets", "WithNamespace"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

// An empty namespace is no namespace: the metrics register without a prefix.
func TestEmptyNamespace(t *testing.T) {
	c := must.Get(idemprom.New(idemprom.WithNamespace("")))(t)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	c.Observe(t.Context(), idem.Event{Kind: idem.EventNew, Tier: idem.TierSQL})
	if n, err := testutil.GatherAndCount(reg, "events_total"); err != nil || n != 1 {
		t.Fatalf("events_total: %d series, %v", n, err)
	}
}
