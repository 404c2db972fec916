package idemotel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/tiered"
)

// rig is an Observer over in-memory exporters.
type rig struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *metric.ManualReader
	obs    *idemotel.Observer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: metric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := metric.NewMeterProvider(metric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := idemotel.New(idemotel.WithTracerProvider(r.tp), idemotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	r.obs = obs
	return r
}

func (r *rig) store(t *testing.T) *tiered.Store {
	t.Helper()
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(r.obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// spansNamed returns the ended spans called name.
func (r *rig) spansNamed(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range r.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// Each call is a span with its outcome and tier, the parent of the work's
// spans, with the call's events; the key appears only as its digest's
// prefix.
func TestSpanPerCall(t *testing.T) {
	r := newRig(t)
	s := r.store(t)
	k := idem.NewKey("tenant-secret", "client-key-secret")
	work := func(ctx context.Context) ([]byte, error) {
		_, span := r.tp.Tracer("app").Start(ctx, "charge")
		span.End()
		return []byte("paid"), nil
	}
	for range 2 {
		if _, err := s.Do(t.Context(), k, "fp", work); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Do(t.Context(), k, "other", work); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	calls := r.spansNamed("idem.call")
	if len(calls) != 3 {
		t.Fatalf("%d call spans, want 3", len(calls))
	}
	var outcomes []string
	for _, c := range calls {
		outcomes = append(outcomes, attr(c, "idem.outcome")+"/"+attr(c, "idem.tier"))
		if got := attr(c, "idem.key"); got != k.String() {
			t.Fatalf("idem.key %q, want the digest prefix %q", got, k.String())
		}
		for _, a := range c.Attributes {
			if strings.Contains(a.Value.String(), "secret") {
				t.Fatalf("attribute %s leaks the key: %q", a.Key, a.Value.String())
			}
		}
	}
	if strings.Join(outcomes, " ") != "executed/sql replayed/local mismatch/local" {
		t.Fatalf("outcomes %v", outcomes)
	}
	charge := r.spansNamed("charge")
	if len(charge) != 1 || charge[0].Parent.SpanID() != calls[0].SpanContext.SpanID() {
		t.Fatal("the work's span is not a child of its call's span")
	}
	var events []string
	for _, e := range calls[0].Events {
		events = append(events, e.Name)
	}
	if got := strings.Join(events, " "); !strings.Contains(got, "idem.claimed") || !strings.Contains(got, "idem.completed") {
		t.Fatalf("events of the first call: %q; want the claim and the completion", got)
	}
}

// Behind otelhttp, the call's span is a child of the server span.
func TestSpanNestsUnderServerSpan(t *testing.T) {
	r := newRig(t)
	s := r.store(t)
	mw, err := middleware.New(s, middleware.WithSingleTenant())
	if err != nil {
		t.Fatal(err)
	}
	h := otelhttp.NewHandler(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})), "POST /pay", otelhttp.WithTracerProvider(r.tp))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	calls := r.spansNamed("idem.call")
	var servers tracetest.SpanStubs
	for _, sp := range r.spans.GetSpans() {
		if sp.SpanKind == trace.SpanKindServer {
			servers = append(servers, sp)
		}
	}
	if len(calls) != 1 || len(servers) != 1 {
		t.Fatalf("%d call spans, %d server spans", len(calls), len(servers))
	}
	if calls[0].Parent.SpanID() != servers[0].SpanContext.SpanID() || calls[0].SpanContext.TraceID() != servers[0].SpanContext.TraceID() {
		t.Fatal("the call's span is not a child of the server span")
	}
}

// Metrics count every caller by outcome and tier, and measure the tiers.
func TestMetrics(t *testing.T) {
	r := newRig(t)
	s := r.store(t)
	k := idem.NewKey("", "k")
	for range 3 {
		if _, err := s.Do(t.Context(), k, "fp", func(context.Context) ([]byte, error) { return []byte("v"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "idem.calls" {
				for _, dp := range sum.DataPoints {
					o, _ := dp.Attributes.Value(attribute.Key("idem.outcome"))
					got[o.AsString()] += dp.Value
				}
			}
		}
	}
	if got["executed"] != 1 || got["replayed"] != 2 {
		t.Fatalf("calls by outcome %v", got)
	}
	for _, n := range []string{"idem.call.duration", "idem.events", "idem.tier.duration", "idem.work.duration"} {
		if !names[n] {
			t.Fatalf("no %s among %v", n, names)
		}
	}
}

// With the no-op providers (the default, until the application sets
// some), the Observer works and records nothing.
func TestNoopProviders(t *testing.T) {
	obs, err := idemotel.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Do(t.Context(), idem.NewKey("", "k"), "fp", func(ctx context.Context) ([]byte, error) {
		if trace.SpanFromContext(ctx).IsRecording() {
			return nil, errors.New("a no-op provider recorded a span")
		}
		return []byte("v"), nil
	}); err != nil {
		t.Fatal(err)
	}
}
