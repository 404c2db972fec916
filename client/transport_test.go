package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/client"
)

// script is a server that answers each request with the next of its
// answers (the last one again once they run out) and records what it got.
type script struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	keys    []string
	bodies  []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, strings.Join(r.Header["Idempotency-Key"], "|"))
	s.bodies = append(s.bodies, string(b))
	a := s.answers[min(n, len(s.answers)-1)]
	s.mu.Unlock()
	a(w)
}

func (s *script) got() (keys, bodies []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]string(nil), s.bodies...)
}

func status(code int, hdr ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

func problem(code int, typ string, hdr ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"type":"https://pkg.go.dev/github.com/idemkit/idem/middleware#`+typ+`","status":409,"detail":"d"}`)
	}
}

// start serves s and returns a client over a Transport with fast backoff
// and the options given, and the attempts it reported.
func start(t *testing.T, s *script, opts ...client.Option) (*http.Client, string, *attempts) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	a := &attempts{}
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	c, err := client.NewClient(&http.Client{Transport: base}, append([]client.Option{
		client.WithBackoff(time.Millisecond, 5*time.Millisecond), client.WithAttemptHook(a.add)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv.URL, a
}

type attempts struct {
	mu   sync.Mutex
	list []client.Attempt
}

func (a *attempts) add(at client.Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, at)
}

func (a *attempts) get() []client.Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]client.Attempt(nil), a.list...)
}

func send(t *testing.T, c *http.Client, ctx context.Context, method, url string, body io.Reader) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b), nil
}

// A minted key is sent on the first attempt and on every retry, unchanged.
func TestOneKeyAcrossRetries(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){status(503), status(502), status(201)}}
	c, url, a := start(t, s)
	resp, body, err := send(t, c, t.Context(), http.MethodPost, url, strings.NewReader(`{"amount":5}`))
	if err != nil || resp.StatusCode != 201 || body != "Created" {
		t.Fatalf("got %v, %q, %v", resp, body, err)
	}
	keys, bodies := s.got()
	if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] || len(keys[0]) != 26 {
		t.Fatalf("keys %q: want one minted key on 3 attempts", keys)
	}
	for _, b := range bodies {
		if b != `{"amount":5}` {
			t.Fatalf("bodies %q: want the same body on each attempt", bodies)
		}
	}
	o, ok := client.OutcomeOf(resp)
	if !ok || o.Key != keys[0] || o.Attempts != 3 {
		t.Fatalf("outcome %+v, %v", o, ok)
	}
	at := a.get()
	if len(at) != 3 || at[0].Cause != nil || !errors.Is(at[1].Cause, client.ErrRetryStatus) || at[2].Number != 3 {
		t.Fatalf("attempts %+v", at)
	}
}

// The caller's key, from the context or the request's header, is the one
// sent; a request of an idempotent method without one gets none and is
// still retried.
func TestCallerKey(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){status(503), status(200)}}
	c, url, _ := start(t, s)
	if _, _, err := send(t, c, client.ContextWithKey(t.Context(), "order-1042"), http.MethodPost, url, nil); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPatch, url, strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", `"quoted, key"`)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, _, err := send(t, c, t.Context(), http.MethodGet, url, nil); err != nil {
		t.Fatal(err)
	}
	keys, _ := s.got()
	want := []string{"order-1042", "order-1042", `"quoted, key"`, ""}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("keys %q, want %q", keys, want)
	}
}

// A key the server would refuse fails before anything is sent.
func TestBadKeyRefused(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){status(201)}}
	c, url, _ := start(t, s)
	for name, key := range map[string]string{
		"empty": "", "long": strings.Repeat("k", 256), "not ascii": "clé", "control": "a\tb",
		"comma": "a,b", "unterminated": `"abc`, "empty quoted": `""`, "bad escape": `"a\b"`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := send(t, c, client.ContextWithKey(t.Context(), key), http.MethodPost, url, nil)
			if !errors.Is(err, client.ErrBadKey) {
				t.Fatalf("err %v, want ErrBadKey", err)
			}
		})
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	req.Header["Idempotency-Key"] = []string{"a", "b"}
	if _, err := c.Do(req); !errors.Is(err, client.ErrBadKey) {
		t.Fatalf("two headers: err %v, want ErrBadKey", err)
	}
	if _, _, err := send(t, c, client.ContextWithKey(t.Context(), strings.Repeat("k", 255)), http.MethodPost, url, nil); err != nil {
		t.Fatalf("255 bytes: %v", err)
	}
	if keys, _ := s.got(); len(keys) != 1 {
		t.Fatalf("the server got %d requests, want only the good key's", len(keys))
	}
}

// The retry table: what a retry can cure is retried, nothing else is.
func TestRetryTable(t *testing.T) {
	inFlight := problem(409, "ProblemInFlight")
	for _, tc := range []struct {
		name     string
		answer   func(http.ResponseWriter)
		attempts int
	}{
		{"400", status(400), 1}, {"401", status(401), 1}, {"403", status(403), 1}, {"404", status(404), 1},
		{"413", status(413), 1}, {"422", problem(422, "ProblemMismatch"), 1}, {"500", status(500), 1},
		{"409 of the application", status(409), 1},
		{"409 not replayable", problem(409, "ProblemNotReplayable", "Idempotency-Should-Retry", "false"), 1},
		{"409 in flight", inFlight, 3},
		{"408", status(408), 3}, {"425", status(425), 3}, {"429", status(429), 3},
		{"502", status(502), 3}, {"503", status(503), 3}, {"504", status(504), 3},
		{"503 should not retry", status(503, "Idempotency-Should-Retry", "false"), 1},
		{"503 stripe should not retry", status(503, "Stripe-Should-Retry", "false"), 1},
		{"500 should retry", status(500, "Stripe-Should-Retry", "true"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{answers: []func(http.ResponseWriter){tc.answer}}
			c, url, _ := start(t, s, client.WithAttempts(3))
			resp, _, err := send(t, c, t.Context(), http.MethodPost, url, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if keys, _ := s.got(); len(keys) != tc.attempts {
				t.Fatalf("%d attempts, want %d", len(keys), tc.attempts)
			}
			if o, _ := client.OutcomeOf(resp); o.Attempts != tc.attempts {
				t.Fatalf("outcome says %d attempts, want %d", o.Attempts, tc.attempts)
			}
		})
	}
}

// idem's problems become typed errors; other answers do not.
func TestCheck(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){problem(422, "ProblemMismatch")}}
	c, url, _ := start(t, s)
	resp, body, err := send(t, c, t.Context(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	resp2, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	perr := client.Check(resp2)
	var p *client.Problem
	if !errors.As(perr, &p) || p.Code != client.CodeMismatch || !errors.Is(perr, idem.ErrMismatch) || p.Status != 422 {
		t.Fatalf("Check: %v", perr)
	}
	if b, _ := io.ReadAll(resp2.Body); string(b) != body {
		t.Fatalf("body after Check %q, want %q", b, body)
	}
	_ = resp
	if err := client.Check(&http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":"boom"}`))}); err != nil {
		t.Fatalf("an application's error is no problem of idem's: %v", err)
	}
}

// A body without GetBody is read once and sent whole on every attempt; one
// over the limit is refused before anything is sent.
func TestBodyReplayable(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){status(503), status(201)}}
	c, url, _ := start(t, s, client.WithBodyLimit(8))
	opaque := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) } // no GetBody
	if _, _, err := send(t, c, t.Context(), http.MethodPost, url, opaque("12345678")); err != nil {
		t.Fatal(err)
	}
	if _, bodies := s.got(); len(bodies) != 2 || bodies[0] != "12345678" || bodies[1] != "12345678" {
		t.Fatalf("bodies %q", bodies)
	}
	if _, _, err := send(t, c, t.Context(), http.MethodPost, url, opaque("123456789")); !errors.Is(err, client.ErrBodyTooLarge) {
		t.Fatalf("err %v, want ErrBodyTooLarge", err)
	}
	// With GetBody, no limit applies.
	if _, _, err := send(t, c, t.Context(), http.MethodPost, url, bytes.NewReader(make([]byte, 100))); err != nil {
		t.Fatal(err)
	}
	if keys, _ := s.got(); len(keys) != 3 {
		t.Fatalf("%d requests, want 3 (none for the refused body)", len(keys))
	}
}

// Retry-After sets the wait; the caller's context ends it.
func TestRetryAfter(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter){status(503, "Retry-After", "1"), status(201)}}
	c, url, a := start(t, s)
	if _, _, err := send(t, c, t.Context(), http.MethodPost, url, nil); err != nil {
		t.Fatal(err)
	}
	if at := a.get(); len(at) != 2 || at[1].Wait < time.Second {
		t.Fatalf("attempts %+v: want a second one after at least Retry-After (1 s)", at)
	}
	s2 := &script{answers: []func(http.ResponseWriter){status(503, "Retry-After", "30")}}
	c2, url2, a2 := start(t, s2)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for len(a2.get()) == 0 || len(func() []string { k, _ := s2.got(); return k }()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, _, err := send(t, c2, ctx, http.MethodPost, url2, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the context's cancellation", err)
	}
}

// An attempt without an answer in its timeout is abandoned and retried
// with the same key.
func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	s := &script{answers: []func(http.ResponseWriter){
		func(w http.ResponseWriter) { <-release; w.WriteHeader(201) },
		status(201),
	}}
	c, url, a := start(t, s, client.WithAttemptTimeout(50*time.Millisecond))
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	resp, _, err := send(t, c, t.Context(), http.MethodPost, url, nil)
	once.Do(func() { close(release) })
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("got %v, %v", resp, err)
	}
	if at := a.get(); len(at) != 2 || !errors.Is(at[1].Cause, client.ErrAttemptTimeout) {
		t.Fatalf("attempts %+v", at)
	}
}

// A deadline that is not below the server's retention is refused.
func TestDeadlineBelowRetention(t *testing.T) {
	if _, err := client.New(nil, client.WithDeadline(2*time.Hour), client.WithRetention(time.Hour)); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("err %v, want ErrConfig", err)
	}
	if _, err := client.New(nil, client.WithDeadline(time.Minute), client.WithRetention(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]client.Option{
		"attempts": client.WithAttempts(0), "timeout": client.WithAttemptTimeout(0), "deadline": client.WithDeadline(-1),
		"backoff": client.WithBackoff(time.Second, time.Millisecond), "body": client.WithBodyLimit(0),
		"header": client.WithKeyHeader("a b"), "methods": client.WithMethods(""), "hook": client.WithAttemptHook(nil),
		"marker": client.WithReplayMarker(""), "retention": client.WithRetention(0),
	} {
		if _, err := client.New(nil, o); !errors.Is(err, idem.ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}

// The last attempt's timeout is the operation's error, and says so.
func TestLastAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	s := &script{answers: []func(http.ResponseWriter){func(w http.ResponseWriter) { <-release }}}
	c, url, _ := start(t, s, client.WithAttemptTimeout(20*time.Millisecond), client.WithAttempts(2))
	_, _, err := send(t, c, t.Context(), http.MethodPost, url, nil)
	close(release)
	if !errors.Is(err, client.ErrAttemptTimeout) || strings.Count(err.Error(), "attempt timed out") != 1 {
		t.Fatalf("err %v, want ErrAttemptTimeout, said once", err)
	}
}
