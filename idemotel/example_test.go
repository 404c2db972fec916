package idemotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// The Observer gives each Store call a span ("idem.call") with the
// decision as attributes; the work's own spans are its children. Give it
// the application's providers, or none for the global ones.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	obs, err := idemotel.New(idemotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	layer, err := memlayer.New()
	if err != nil {
		panic(err)
	}
	store, err := tiered.New(tiered.WithSQL(layer), tiered.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	key := idem.NewKey("payments", "order-1")
	for range 2 {
		_, err := store.Do(context.Background(), key, "fp", func(ctx context.Context) ([]byte, error) {
			_, span := tp.Tracer("app").Start(ctx, "charge")
			defer span.End()
			return []byte("charged"), nil
		})
		if err != nil {
			panic(err)
		}
	}
	for _, s := range spans.GetSpans() {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		if s.Name == "idem.call" {
			fmt.Println(s.Name, attrs["idem.outcome"], attrs["idem.tier"])
		} else {
			fmt.Println(s.Name, "under", s.Parent.SpanID() == spans.GetSpans()[1].SpanContext.SpanID())
		}
	}
	// Output:
	// charge under true
	// idem.call executed sql
	// idem.call replayed local
}
