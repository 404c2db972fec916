package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/labstack/echo/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemecho"
	"github.com/idemkit/idem/middleware/idemgin"
	"github.com/idemkit/idem/tiered"
)

// guards are idem in front of each kind of service, over one Store.
type guards struct {
	http func(http.Handler) http.Handler // net/http, and chi through Use
	gin  gin.HandlerFunc
	echo echo.MiddlewareFunc
	grpc grpc.UnaryServerInterceptor
}

// guard builds every middleware and interceptor of the tests, with their
// options, in this one place.
func guard(t *testing.T, store *tiered.Store) guards {
	t.Helper()
	// One principal: the operator's --scope is then "" for HTTP and the
	// method for gRPC, as the service's keys are.
	opts := []middleware.Option{middleware.WithSingleTenant()}
	return guards{
		http: must.Get(middleware.New(store, opts...))(t),
		gin:  must.Get(idemgin.Middleware(store, opts...))(t),
		echo: must.Get(idemecho.Middleware(store, opts...))(t),
		grpc: must.Get(idemgrpc.UnaryServerInterceptor(store, idemgrpc.WithSingleTenant()))(t),
	}
}

// work is the guarded operation: its first run blocks until unblock is
// closed (an owner stuck, renewing its claim), every later one answers at
// once.
type work struct {
	runs    atomic.Int64
	unblock chan struct{}
}

func (w *work) do(ctx context.Context) string {
	n := w.runs.Add(1)
	if n == 1 {
		select {
		case <-w.unblock:
		case <-ctx.Done():
		}
	}
	return "run-" + string(rune('0'+n))
}

// call sends one request with an idempotency key through an adapter and
// returns the answer's status (an HTTP code; for gRPC 200 or 0 for an
// error) and body.
type call func(ctx context.Context, key string) (int, string)

// adapters are the ways into a service, each over its Store's guards.
var adapters = []struct {
	name  string
	serve func(g guards, w *work) call
}{
	{"net/http", func(g guards, w *work) call {
		return httpCall(g.http(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, w.do(r.Context()))
		})))
	}},
	{"chi", func(g guards, w *work) call {
		r := chi.NewRouter()
		r.Use(g.http)
		r.Post("/pay", func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, w.do(r.Context()))
		})
		return httpCall(r)
	}},
	{"gin", func(g guards, w *work) call {
		gin.SetMode(gin.TestMode)
		e := gin.New()
		e.Use(g.gin)
		e.POST("/pay", func(c *gin.Context) { c.String(http.StatusCreated, w.do(c.Request.Context())) })
		return httpCall(e)
	}},
	{"echo", func(g guards, w *work) call {
		e := echo.New()
		e.Use(g.echo)
		e.POST("/pay", func(c echo.Context) error { return c.String(http.StatusCreated, w.do(c.Request().Context())) })
		return httpCall(e)
	}},
	{"grpc", func(g guards, w *work) call {
		return func(ctx context.Context, key string) (int, string) {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("idempotency-key", key))
			req, err := structpb.NewStruct(map[string]any{"amount": 100})
			if err != nil {
				return 0, err.Error()
			}
			resp, err := g.grpc(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/test.Payments/Charge"},
				func(ctx context.Context, _ any) (any, error) {
					return structpb.NewStruct(map[string]any{"run": w.do(ctx)})
				})
			if err != nil {
				return 0, err.Error()
			}
			return http.StatusOK, resp.(*structpb.Struct).GetFields()["run"].GetStringValue()
		}
	}},
}

func httpCall(h http.Handler) call {
	return func(ctx context.Context, key string) (int, string) {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/pay", strings.NewReader(`{"amount":100}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.String()
	}
}

// A key stuck behind an owner that never finishes is refused to every
// retry; once the command releases it, the next retry runs the work again,
// through each adapter, and the audit rows are there. The stuck owner's
// late completion changes nothing.
func TestReleasedKeyRunsAgainThroughEveryAdapter(t *testing.T) {
	for _, a := range adapters {
		t.Run(strings.ReplaceAll(a.name, "/", "-"), func(t *testing.T) {
			svc := newService(t, testenv.Postgres(t))
			// Instance A holds the stuck owner; instance B serves the
			// retries, as two replicas of the service would.
			stuckSQL, stuckRedis := svc.instance(t)
			stuck := must.Get(tiered.New(tiered.WithSQL(stuckSQL), tiered.WithRedis(stuckRedis)))(t)
			t.Cleanup(func() { _ = stuck.Close() })
			retrySQL, retryRedis := svc.instance(t)
			retry := must.Get(tiered.New(tiered.WithSQL(retrySQL), tiered.WithRedis(retryRedis), tiered.WithWait(100*time.Millisecond)))(t)
			t.Cleanup(func() { _ = retry.Close() })
			w := &work{unblock: make(chan struct{})}
			first, again := a.serve(guard(t, stuck), w), a.serve(guard(t, retry), w)

			var wg sync.WaitGroup
			defer wg.Wait()
			unblock := sync.OnceFunc(func() { close(w.unblock) })
			defer unblock()
			wg.Go(func() { first(testCtx(t), "pay-42") })

			// The claim appears; the retry is refused while it is held.
			var digest string
			deadline := time.Now().Add(30 * time.Second)
			for digest == "" {
				claims := jsonOf[struct{ Claims []view }](t, svc.idem(t, "", "list", "--in-progress", "--json")).Claims
				if len(claims) == 1 && w.runs.Load() == 1 {
					digest = claims[0].Digest
				} else if time.Now().After(deadline) {
					t.Fatalf("no claim in progress: %+v, runs %d", claims, w.runs.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if code, body := again(testCtx(t), "pay-42"); code == http.StatusCreated || code == http.StatusOK || w.runs.Load() != 1 {
				t.Fatalf("retry of a held key: %d %q, runs %d: want refused, not run", code, body, w.runs.Load())
			}

			o := svc.idem(t, "", "release", "--digest", digest, "--reason", "owner hung, INC-9", "--by", "oncall")
			if o.code != exitOK {
				t.Fatalf("release: %d\n%s%s", o.code, o.stdout, o.stderr)
			}
			code, body := again(testCtx(t), "pay-42")
			if (code != http.StatusCreated && code != http.StatusOK) || body != "run-2" || w.runs.Load() != 2 {
				t.Fatalf("retry after the release: %d %q, runs %d: want it run again", code, body, w.runs.Load())
			}
			key := must.Get(idem.KeyFromHex(digest))(t)
			rows := svc.trail(t, key)
			if len(rows) != 2 || rows[0].By != "oncall" || rows[1].By != "oncall" || rows[0].Reason != "owner hung, INC-9" {
				t.Fatalf("audit rows: %+v, want the release of both tiers", rows)
			}

			// get decodes the answer each adapter stored.
			got := jsonOf[lookup](t, svc.idem(t, "", "get", "--digest", digest, "--json"))
			ans := got.Tiers[0].Answer
			switch {
			case ans == nil:
				t.Fatalf("get: no answer in %+v", got.Tiers[0])
			case a.name == "grpc" && (ans.Kind != "grpc" || ans.MessageType != "google.protobuf.Struct"):
				t.Fatalf("get: the gRPC answer decoded as %+v", ans)
			case a.name != "grpc" && (ans.Kind != "http" || ans.Status != http.StatusCreated || ans.BodyStart != `"run-2"`):
				t.Fatalf("get: the HTTP answer decoded as %+v", ans)
			}

			// The stuck owner finishes late: the retry's answer stands.
			unblock()
			wg.Wait()
			if code, body := again(testCtx(t), "pay-42"); body != "run-2" || w.runs.Load() != 2 {
				t.Fatalf("replay after the old owner finished: %d %q, runs %d", code, body, w.runs.Load())
			}
		})
	}
}
