package bench

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// BenchmarkObserve measures what instrumentation costs a call of the Store,
// on the memory layer so that no I/O hides it (the worst case: on Redis and
// SQL the same cost is a far smaller share).
//
//	impl=none        no observer
//	impl=prometheus  idemprom's Collector (registered)
//	impl=otel-noop   idemotel over the no-op providers (OpenTelemetry's default)
//	impl=otel-sdk    idemotel over the SDK: every span sampled and exported to
//	                 memory (reset as it goes), metrics to a manual reader
//
//	op=new         Do on a fresh key: claim, work, completion
//	op=hot-replay  Do on a completed key served by the local cache
func BenchmarkObserve(b *testing.B) {
	impls := []struct {
		name string
		obs  func(b *testing.B) idem.Observer
	}{
		{"none", func(*testing.B) idem.Observer { return nil }},
		{"prometheus", func(b *testing.B) idem.Observer {
			c := must.Get(idemprom.New())(b)
			prometheus.NewRegistry().MustRegister(c)
			return c
		}},
		{"otel-noop", func(b *testing.B) idem.Observer {
			return must.Get(idemotel.New(idemotel.WithTracerProvider(tracenoop.NewTracerProvider()),
				idemotel.WithMeterProvider(noop.NewMeterProvider())))(b)
		}},
		{"otel-sdk", func(b *testing.B) idem.Observer {
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(resetting{spans}))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			return must.Get(idemotel.New(idemotel.WithTracerProvider(tp), idemotel.WithMeterProvider(mp)))(b)
		}},
	}
	ctx := context.Background()
	for _, op := range []string{"new", "hot-replay"} {
		for _, impl := range impls {
			b.Run("op="+op+"/impl="+impl.name, func(b *testing.B) {
				opts := []tiered.Option{tiered.WithSQL(must.Get(memlayer.New())(b))}
				if o := impl.obs(b); o != nil {
					opts = append(opts, tiered.WithObserver(o))
				}
				s := must.Get(tiered.New(opts...))(b)
				b.Cleanup(func() { _ = s.Close() })
				hot := freshKey()
				if _, err := s.Do(ctx, hot, fp, work); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					k := hot
					if op == "new" {
						k = freshKey()
					}
					if _, err := s.Do(ctx, k, fp, work); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// resetting exports to an in-memory exporter and forgets what it holds, so
// that a long benchmark does not grow its heap.
type resetting struct{ *tracetest.InMemoryExporter }

func (r resetting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	r.Reset()
	return r.InMemoryExporter.ExportSpans(ctx, spans)
}
