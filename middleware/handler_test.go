package middleware

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

func newTestStore(t *testing.T) *tiered.Store {
	t.Helper()
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A request without a key costs nothing but the header lookup.
func TestPassThroughAllocatesNothing(t *testing.T) {
	h := must.Get(New(newTestStore(t), WithSingleTenant()))(t)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req := httptest.NewRequest(method, "/pay", strings.NewReader(`{"amount":1}`))
		if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(rec, req) }); n != 0 {
			t.Errorf("%s without a key: %v allocations", method, n)
		}
	}
}

func problemOf(t *testing.T, rec *httptest.ResponseRecorder) Problem {
	t.Helper()
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("%q: %v", rec.Body, err)
	}
	return p
}

// A tombstone is 409 when stored; the requests that shared an execution the
// policy released see the failure's own status instead.
func TestReplayTombstone(t *testing.T) {
	h := must.Get(NewHandler(newTestStore(t), WithSingleTenant(), WithReplayMarker("Idempotent-Replayed")))(t)
	for _, c := range []struct {
		name     string
		val      []byte
		released bool
		status   int
		original int
	}{
		{"stored streamed", encode(200, flagStreamed, nil, nil), false, 409, 200},
		{"stored oversize 404", encode(404, flagOversize, nil, nil), false, 409, 404},
		{"stored hijacked", encode(0, flagHijacked, nil, nil), false, 409, 0},
		{"released streamed 503", encode(503, flagStreamed, nil, nil), true, 503, 503},
		{"released oversize 429", encode(429, flagOversize, nil, nil), true, 429, 429},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.replay(rec, httptest.NewRequest(http.MethodPost, "/", nil), c.val, c.released, AnswerReplayed)
			p := problemOf(t, rec)
			if rec.Code != c.status || p.Type != ProblemNotReplayable || p.OriginalStatus != c.original {
				t.Fatalf("got %d %+v", rec.Code, p)
			}
			if rec.Header().Get("Retry-After") != "" || rec.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("headers %v", rec.Header())
			}
		})
	}
}

// A replay repeats only what the current allow-list allows, and a damaged
// record is a 500, never a guess.
func TestReplayFiltersAndRejects(t *testing.T) {
	h := must.Get(NewHandler(newTestStore(t), WithSingleTenant(), WithReplayHeaders("Location")))(t)
	rec := httptest.NewRecorder()
	val := encode(201, 0, []string{"Content-Type", "text/plain", "Location", "/p/1", "Set-Cookie", "s=1"}, []byte("ok"))
	h.replay(rec, httptest.NewRequest(http.MethodPost, "/", nil), val, false, AnswerReplayed)
	if rec.Code != 201 || rec.Body.String() != "ok" || rec.Header().Get("Location") != "/p/1" ||
		rec.Header().Get("Set-Cookie") != "" || rec.Header().Get("Content-Length") != "2" {
		t.Fatalf("replay %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	if ct := rec.Header().Get("Content-Type"); ct == "text/plain" {
		t.Fatal("a header no longer allow-listed was replayed")
	}
	rec = httptest.NewRecorder()
	h.replay(rec, httptest.NewRequest(http.MethodPost, "/", nil), []byte("not a response"), false, AnswerReplayed)
	if p := problemOf(t, rec); rec.Code != 500 || p.Type != ProblemFailed {
		t.Fatalf("damaged record: %d %+v", rec.Code, p)
	}
}

// A handler that panics before writing leaves no half-built headers on the
// 500 problem the client gets.
func TestPanicDropsHandlerHeaders(t *testing.T) {
	h := must.Get(New(newTestStore(t), WithSingleTenant()))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/p/1")
		w.Header().Set("Set-Cookie", "s=1")
		w.Header().Set("X-Request-Id", "inner")
		w.Header().Del("X-Trace")
		panic("boom")
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "outer") // set by middleware before ours: kept
	rec.Header().Set("X-Trace", "t1")         // likewise, though the handler deleted it
	h.ServeHTTP(rec, req)
	p := problemOf(t, rec)
	if rec.Code != 500 || p.Type != ProblemFailed {
		t.Fatalf("got %d %+v", rec.Code, p)
	}
	if rec.Header().Get("Location") != "" || rec.Header().Get("Set-Cookie") != "" ||
		rec.Header().Get("X-Request-Id") != "outer" || rec.Header().Get("X-Trace") != "t1" {
		t.Fatalf("headers %v", rec.Header())
	}
}

// A panic after the handler began its response, while the response is
// still held, answers a clean 500: nothing of the half-built response went
// out.
func TestPanicInHeldResponse(t *testing.T) {
	h := must.Get(New(newTestStore(t), WithSingleTenant()))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/p/1")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"half":`)
		panic("boom")
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if p := problemOf(t, rec); rec.Code != 500 || p.Type != ProblemFailed || rec.Header().Get("Location") != "" {
		t.Fatalf("got %d %+v %v", rec.Code, p, rec.Header())
	}
}

// A panic after the response went out (here: flushed) cuts the
// connection: net/http's http.ErrAbortHandler, never a whole-looking
// response.
func TestLatePanicAborts(t *testing.T) {
	h := must.Get(New(newTestStore(t), WithSingleTenant()))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		panic("boom")
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k")
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), req)
}

// Options given nonsense are an error from NewHandler that names each of
// them; nothing silently keeps a default any more.
func TestOptionsRefuseNonsense(t *testing.T) {
	_, err := NewHandler(nil, WithKeyHeader("bad header"), WithBodyLimit(-1), WithResponseLimit(-1),
		WithKeep(nil), WithErrorWriter(nil), WithFingerprint(fingerprint.WithMaxDepth(-1)), WithReplayMarker("bad marker"),
		WithStatuses(Statuses{InFlight: 99, Mismatch: 409, Failed: 600}), WithReplayHeaders("location", "bad name"),
		WithRetryAfter(1500*time.Millisecond, 0), WithMethods("POST", ""), WithScope(nil))
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("NewHandler with nonsense: %v, want ErrConfig", err)
	}
	for _, name := range []string{"New: give a store", "WithKeyHeader: give ", "WithBodyLimit: give ", "WithResponseLimit: give ", "WithKeep: give ",
		"WithErrorWriter: give ", "WithFingerprint: fingerprint: WithMaxDepth: give ", "WithReplayMarker: give ",
		"give InFlight a status of 200–599, or 0 for the default (got 99)", "give Failed a status of 200–599, or 0 for the default (got 600)",
		"WithReplayHeaders: give ", "WithRetryAfter: give ", "WithMethods: give ", "WithScope: give a function"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "Mismatch") {
		t.Errorf("the error names a valid status: %v", err)
	}
	// The configuration error is said once, however deep the fault.
	if n := strings.Count(err.Error(), idem.ErrConfig.Error()); n != 1 {
		t.Errorf("the error says %q %d times: %v", idem.ErrConfig, n, err)
	}
}

// Valid settings are taken as given: a zero Statuses field keeps its
// default, never-stored headers are dropped, Retry-After rounds up.
func TestOptionsTakeValidSettings(t *testing.T) {
	h := must.Get(NewHandler(newTestStore(t), WithSingleTenant(), WithKeyHeader("x-request-key"), WithReplayMarker("idempotent-replayed"),
		WithStatuses(Statuses{Mismatch: 409}), WithReplayHeaders("set-cookie", "location", "Location"),
		WithRetryAfter(1500*time.Millisecond, time.Millisecond), WithBodyLimit(0), WithResponseLimit(0)))(t)
	c := h.c
	if c.keyHeader != "X-Request-Key" || c.marker != "Idempotent-Replayed" || c.bodyLimit != 0 || c.responseLimit != 0 {
		t.Fatalf("config %+v", c)
	}
	if c.statuses.Mismatch != 409 || c.statuses.InFlight != 409 || c.statuses.Unavailable != 503 {
		t.Fatalf("statuses %+v", c.statuses)
	}
	if len(c.replay) != 1 || c.replay[0] != "Location" {
		t.Fatalf("replay headers %q", c.replay)
	}
	if c.retryAfter != [2]string{"2", "1"} {
		t.Fatalf("retry after %q", c.retryAfter)
	}
}

// WithBodyLimit(0) and WithResponseLimit(0) are no limit of the
// middleware's own: a body and a response over the defaults are read,
// kept and replayed whole (the layers' limit, idem.MaxResult, still holds
// for what is kept).
func TestZeroLimitsAreNone(t *testing.T) {
	big := strings.Repeat("x", max(DefaultBodyLimit, DefaultResponseLimit)+1)
	runs := 0
	h := must.Get(New(newTestStore(t), WithSingleTenant(), WithBodyLimit(0), WithResponseLimit(0),
		WithFingerprint(fingerprint.WithMaxBytes(0))))(t)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(b)
			_, _ = w.Write(b) // twice the body: over the response default too
		}))
	for i := range 2 {
		req := httptest.NewRequest(http.MethodPost, "/big", strings.NewReader(big))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Idempotency-Key", "big")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Body.Len() != 2*len(big) {
			t.Fatalf("request %d: %d, %d bytes", i, rec.Code, rec.Body.Len())
		}
	}
	if runs != 1 {
		t.Fatalf("the handler ran %d times", runs)
	}
}

// The details of problems about the client's input read as sentences for
// the client: no Go package prefixes.
func TestProblemDetailsForClients(t *testing.T) {
	h := must.Get(New(newTestStore(t), WithSingleTenant()))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	for _, c := range []struct {
		name, key, body string
		typ             string
	}{
		{"malformed key", strings.Repeat("k", 300), `{}`, ProblemKeyMalformed},
		{"broken JSON", "k1", `{"amount":`, ProblemBodyInvalid},
		{"duplicate member", "k2", `{"a":1,"a":2}`, ProblemBodyInvalid},
		{"ambiguous member", "k3", `{"amount":100,"AMOUNT":5}`, ProblemBodyInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", c.key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			p := problemOf(t, rec)
			if p.Type != c.typ || p.Detail == "" {
				t.Fatalf("problem %+v", p)
			}
			for _, prefix := range []string{"middleware:", "fingerprint:", "idem:"} {
				if strings.Contains(p.Detail, prefix) {
					t.Fatalf("detail %q carries %q", p.Detail, prefix)
				}
			}
			if d := p.Detail; d[0] < 'A' || d[0] > 'Z' || !strings.HasSuffix(d, ".") {
				t.Fatalf("detail %q is not a sentence", d)
			}
		})
	}
}

// JSON sent as text/plain with a new timestamp is a 422 by default (its
// bytes count) and a replay with WithFingerprint(WithJSONBodies(true)).
func TestFingerprintJSONBodies(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []Option
		retry int
	}{
		{"default", nil, http.StatusUnprocessableEntity},
		{"json bodies", []Option{WithFingerprint(fingerprint.WithJSONBodies(true))}, http.StatusCreated},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			h := must.Get(New(newTestStore(t), append([]Option{WithSingleTenant()}, c.opts...)...))(t)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				w.WriteHeader(http.StatusCreated)
			}))
			send := func(body string) int {
				req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(body))
				req.Header.Set("Content-Type", "text/plain")
				req.Header.Set("Idempotency-Key", "k")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec.Code
			}
			if got := send(`{"amount":1,"timestamp":"10:00:00"}`); got != http.StatusCreated {
				t.Fatalf("first: %d", got)
			}
			if got := send(`{"amount":1,"timestamp":"10:00:05"}`); got != c.retry || runs != 1 {
				t.Fatalf("retry with a new timestamp: %d after %d runs, want %d after 1", got, runs, c.retry)
			}
		})
	}
}
