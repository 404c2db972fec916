package reliability

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/tiered"
)

// Behind otelgin and otelecho, as behind otelhttp (tested in idemotel),
// the Store call's span is a child of the framework's server span, in the
// same trace, and the handler's own span is a child of the call's — on
// the real stack.
func TestSpansNestUnderFrameworkServerSpans(t *testing.T) {
	for _, fw := range []struct {
		name  string
		build func(t *testing.T, tp trace.TracerProvider, s *tiered.Store, h http.HandlerFunc) http.Handler
	}{
		{"gin", func(t *testing.T, tp trace.TracerProvider, s *tiered.Store, h http.HandlerFunc) http.Handler {
			gin.SetMode(gin.ReleaseMode)
			r := gin.New()
			r.Use(otelgin.Middleware("payments", otelgin.WithTracerProvider(tp)))
			r.Use(must.Get(idemgin.Middleware(s, middleware.WithSingleTenant()))(t))
			r.POST("/pay", func(c *gin.Context) { h(c.Writer, c.Request) })
			return r
		}},
		{"echo", func(t *testing.T, tp trace.TracerProvider, s *tiered.Store, h http.HandlerFunc) http.Handler {
			e := echo.New()
			e.Use(otelecho.Middleware("payments", otelecho.WithTracerProvider(tp)))
			e.Use(must.Get(idemecho.Middleware(s, middleware.WithSingleTenant()))(t))
			e.POST("/pay", func(c echo.Context) error { h(c.Response(), c.Request()); return nil })
			return e
		}},
	} {
		t.Run(fw.name, func(t *testing.T) {
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			obs := must.Get(idemotel.New(idemotel.WithTracerProvider(tp)))(t)
			st := stacktest.Real(t)
			s := st.Store(t, tiered.WithObserver(obs))
			h := fw.build(t, tp, s, func(w http.ResponseWriter, r *http.Request) {
				_, span := tp.Tracer("app").Start(r.Context(), "charge")
				span.End()
				w.WriteHeader(http.StatusCreated)
			})
			for range 2 {
				req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{"amount":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "nest-"+fw.name)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					t.Fatalf("status %d", rec.Code)
				}
			}
			var servers, calls, charges tracetest.SpanStubs
			for _, sp := range spans.GetSpans() {
				switch {
				case sp.SpanKind == trace.SpanKindServer:
					servers = append(servers, sp)
				case sp.Name == "idem.call":
					calls = append(calls, sp)
				case sp.Name == "charge":
					charges = append(charges, sp)
				}
			}
			if len(servers) != 2 || len(calls) != 2 || len(charges) != 1 {
				t.Fatalf("%d server, %d call, %d charge spans", len(servers), len(calls), len(charges))
			}
			for i := range 2 {
				c, srv := calls[i], servers[i]
				if c.Parent.SpanID() != srv.SpanContext.SpanID() || c.SpanContext.TraceID() != srv.SpanContext.TraceID() {
					t.Fatalf("call %d is not a child of its server span", i)
				}
			}
			if charges[0].Parent.SpanID() != calls[0].SpanContext.SpanID() {
				t.Fatal("the handler's span is not a child of the call's")
			}
		})
	}
}
