package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// Prometheus and OpenTelemetry combined through idem.Observers, as the
// documentation suggests, both hear every call: idem_calls_total and
// idem_call_duration_seconds count it, an idem.call span holds it and is
// the parent of the work's, and the events still reach both.
//
// It lives here, where both integrations are already required, so that
// neither module requires the other.
func TestWithPrometheusThroughObservers(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otelObs := must.Get(idemotel.New(idemotel.WithTracerProvider(tp)))(t)
	c := must.Get(idemprom.New())(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(idem.Observers(c, otelObs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	k := idem.NewKey("", "k")
	var work trace.SpanContext
	for range 2 {
		if _, err := s.Do(t.Context(), k, "fp", func(ctx context.Context) ([]byte, error) {
			work = trace.SpanContextFromContext(ctx)
			return []byte("v"), nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	want := `
# HELP idem_calls_total Store calls by outcome (executed, replayed, mismatch, in_flight, unavailable, pending, lease_lost, failed, not_replayable, config_error, canceled, closed, invalid) and the tier that answered; every caller counts, and a caller that waited for an execution in flight and got its result is replayed.
# TYPE idem_calls_total counter
idem_calls_total{outcome="executed",tier="sql"} 1
idem_calls_total{outcome="replayed",tier="local"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "idem_call_duration_seconds"); n != 2 {
		t.Errorf("idem_call_duration_seconds: %d series, want 2 (executed, replayed)", n)
	}
	if n := testutil.CollectAndCount(c, "idem_events_total"); n == 0 {
		t.Error("idem_events_total: no series: the events did not reach the collector")
	}

	var spans tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == "idem.call" {
			spans = append(spans, s)
		}
	}
	if len(spans) != 2 {
		t.Fatalf("%d idem.call spans, want 2", len(spans))
	}
	if attr(spans[0], "idem.outcome") != "executed" || attr(spans[1], "idem.outcome") != "replayed" {
		t.Errorf("span outcomes %q, %q; want executed, replayed", attr(spans[0], "idem.outcome"), attr(spans[1], "idem.outcome"))
	}
	if !work.IsValid() || work.SpanID() != spans[0].SpanContext.SpanID() {
		t.Error("the work did not run under the call's span")
	}
	events := 0
	for _, e := range spans[0].Events {
		if strings.HasPrefix(e.Name, "idem.") {
			events++
		}
	}
	if events == 0 {
		t.Error("the call's span holds none of its events")
	}
}

// attr returns the value of the span's attribute key, or "".
func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}
