package idemgin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/internal/testkit/behaviour"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/middleware/idemgin"
)

// outer is what a middleware before idem sees once the chain returns.
type outer struct {
	status  int
	aborted bool
}

// router returns e with a recording middleware first, idem (unless
// withIdem is false), a later middleware answering 401 itself on
// /later-abort and panicking on /later-panic, and a counting handler.
func router(t *testing.T, e func() *gin.Engine, withIdem bool, saw *[]outer, runs *int) *gin.Engine {
	r := e()
	r.Use(func(c *gin.Context) {
		defer func() { *saw = append(*saw, outer{c.Writer.Status(), c.IsAborted()}) }() // panics too
		c.Next()
	})
	if withIdem {
		r.Use(must.Get(idemgin.Middleware(behaviour.MemoryStore(t), middleware.WithSingleTenant(), middleware.WithRequire(false)))(t))
	}
	r.Use(func(c *gin.Context) {
		switch c.Request.URL.Path {
		case "/later-abort":
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "who are you"})
		case "/later-panic":
			panic("later middleware panic")
		}
	})
	r.Any("/*path", func(c *gin.Context) {
		*runs++
		c.JSON(http.StatusCreated, gin.H{"run": *runs})
	})
	return r
}

// TestPassThroughIsGin checks that a request the core passes through
// (no key, or a method it does not guard) meets exactly the chain it would
// meet without idem: same answer, same handler runs, and the same view for
// middleware before idem, panics included.
func TestPassThroughIsGin(t *testing.T) {
	for _, e := range engines[1:] { // engines that recover, so that a panic is an answer
		t.Run(e.name, func(t *testing.T) {
			for _, q := range []struct{ method, path, key string }{
				{http.MethodPost, "/pay", ""},
				{http.MethodGet, "/pay", "k"},
				{http.MethodPost, "/later-abort", ""},
				{http.MethodPost, "/later-panic", ""},
				{http.MethodGet, "/later-panic", "k"},
			} {
				var want, got []outer
				var wantRuns, gotRuns int
				bare, guarded := router(t, e.new, false, &want, &wantRuns), router(t, e.new, true, &got, &gotRuns)
				a, b := serve(bare, q.method, q.path, q.key), serve(guarded, q.method, q.path, q.key)
				if a != b || wantRuns != gotRuns || len(want) != 1 || len(got) != 1 || want[0] != got[0] {
					t.Errorf("%s %s key %q: with idem %+v runs %d outer %+v, without %+v runs %d outer %+v",
						q.method, q.path, q.key, b, gotRuns, got, a, wantRuns, want)
				}
			}
		})
	}
}

func serve(h http.Handler, method, path, key string) behaviour.Result {
	req := httptest.NewRequest(method, path, strings.NewReader(`{"amount":1}`))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return behaviour.Result{Status: rec.Code, ContentType: rec.Header().Get("Content-Type"), Body: rec.Body.String()}
}

// TestOuterSeesAbort checks what a middleware before idem sees on each
// path the core takes: the chain is aborted whenever the core answered or
// a later handler failed, and not when the chain ran to its end, as
// without idem.
func TestOuterSeesAbort(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			var saw []outer
			var runs int
			r := router(t, e.new, true, &saw, &runs)
			for _, c := range []struct {
				name, path, key string
				want            outer
				runs            int
			}{
				{"executed", "/pay", "k1", outer{http.StatusCreated, false}, 1},
				{"replayed", "/pay", "k1", outer{http.StatusCreated, true}, 1},
				{"mismatch", "/other", "k1", outer{http.StatusUnprocessableEntity, true}, 1},
				{"later aborts", "/later-abort", "k2", outer{http.StatusUnauthorized, true}, 1},
				{"later panics", "/later-panic", "k3", outer{http.StatusInternalServerError, true}, 1},
				{"retry after the panic", "/later-panic", "k3", outer{http.StatusInternalServerError, true}, 1},
				{"malformed key", "/pay", `"`, outer{http.StatusBadRequest, true}, 1},
			} {
				saw = saw[:0]
				got := serve(r, http.MethodPost, c.path, c.key)
				if len(saw) != 1 || saw[0] != c.want || got.Status != c.want.status || runs != c.runs {
					t.Errorf("%s: answered %d, outer saw %+v, handler runs %d; want %+v and %d runs", c.name, got.Status, saw, runs, c.want, c.runs)
				}
			}
		})
	}
}
