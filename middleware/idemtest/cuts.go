package idemtest

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/middleware"
)

// cutApp is the handler of the cut rows: its first run begins a response and
// panics; every later run answers 201 with its run number.
type cutApp struct {
	runs  atomic.Int64
	write func(w http.ResponseWriter) // what the first run writes
	value any                         // what the first run panics with
}

func (a *cutApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	if n == 1 {
		if a.write != nil {
			a.write(w)
		}
		panic(a.value)
	}
	writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"run":%d}`, n))
}

// bodyOf returns a writer of n bytes of body, declaring length first when
// length > 0, and flushing after when flush is set.
func bodyOf(n, length int, flush bool) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/plain")
		if length > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(length))
		}
		io.WriteString(w, strings.Repeat("x", n))
		if flush {
			http.NewResponseController(w).Flush()
		}
	}
}

// cuts checks that a response the handler began and then abandoned by
// panicking never reaches its client as complete, over real HTTP/1.1 and
// HTTP/2 servers, whatever recovery middleware the stack puts around the
// middleware. A response the middleware still held (it holds the leader's
// response until the Store has decided) is replaced whole by a 500 problem;
// one that went out already (flushed, or declared larger than the response
// limit) is cut: the client reads an error (an unexpected EOF, a stream
// reset). Either way the key is released, so that the retry runs the
// handler once more and is then replayed. Bodies are smaller and larger
// than the server's write buffer (4 KiB), with and without Content-Length
// and Flush; a handler that panics with http.ErrAbortHandler asks for the
// cut even before it wrote anything. In the atomic mode a flush holds the
// response (nothing leaves before the commit): a flushed response is
// replaced whole, as a held one is.
func (k *kit) cuts(t *testing.T) {
	t.Helper()
	for _, c := range []struct {
		name  string
		write func(http.ResponseWriter)
		value any
		held  bool // the middleware holds this back: then the whole answer is a 500 problem
		// heldAtomic: held in the atomic mode, where a flush holds
		heldAtomic bool
	}{
		{"status only", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }, "idemtest: cut", true, true},
		{"small body", bodyOf(100, 0, false), "idemtest: cut", true, true},
		{"small body flushed", bodyOf(100, 0, true), "idemtest: cut", false, true},
		{"body past the buffer", bodyOf(16<<10, 0, false), "idemtest: cut", true, true},
		{"declared length", bodyOf(100, 200, false), "idemtest: cut", true, true},
		{"declared length past the response limit", bodyOf(100, middleware.DefaultResponseLimit+1, false), "idemtest: cut", false, false},
		{"declared length past the buffer flushed", bodyOf(16<<10, 32<<10, true), "idemtest: cut", false, true},
		{"abort before writing", nil, http.ErrAbortHandler, false, false},
		{"abort after flushing", bodyOf(100, 0, true), http.ErrAbortHandler, false, false},
	} {
		for _, h2 := range []bool{false, true} {
			proto := "HTTP/1.1"
			if h2 {
				proto = "HTTP/2.0"
			}
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				k.parallel(t)
				held := c.held || (k.Atomic && c.heldAtomic)
				app := &cutApp{write: c.write, value: c.value}
				mounted, err := k.Mount(k.open(t, nil).store, kitOptions(nil), app)
				if err != nil {
					t.Fatalf("mount: %v", err)
				}
				srv := newServer(t, mounted, h2)
				k := newKey()
				if r, err := sendTo(t, srv.Client(), http.MethodPost, srv.URL+"/pay", k, payBody); err == nil {
					if !held || r.status != http.StatusInternalServerError || !strings.Contains(string(r.body), middleware.ProblemFailed) {
						t.Fatalf("a response cut by a panic arrived complete: %s %d, %d bytes %.60q", r.proto, r.status, len(r.body), r.body)
					}
				}
				if n := app.runs.Load(); n != 1 {
					t.Fatalf("handler ran %d times, want 1", n)
				}
				r, err := sendTo(t, srv.Client(), http.MethodPost, srv.URL+"/pay", k, payBody)
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if r.proto != proto || r.status != http.StatusCreated || string(r.body) != `{"run":2}` {
					t.Fatalf("retry %s %d %q, want %s 201 run 2", r.proto, r.status, r.body, proto)
				}
				b, err := sendTo(t, srv.Client(), http.MethodPost, srv.URL+"/pay", k, payBody)
				if err != nil {
					t.Fatalf("replay: %v", err)
				}
				wantSame(t, r, b)
				if n := app.runs.Load(); n != 2 {
					t.Fatalf("handler ran %d times, want 2", n)
				}
			})
		}
	}
}

// newServer starts a real server for h, over HTTP/2 with TLS when h2 is
// set, closed when the test ends. Its error log is discarded: cut
// connections make it talk.
func newServer(t *testing.T, h http.Handler, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// sendTo sends a JSON body to url with key as its Idempotency-Key unless
// empty, and reads the answer in full. Any error, the client's or the
// body's, is returned.
func sendTo(t *testing.T, client *http.Client, method, url, key, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: res.StatusCode, header: res.Header, body: b, proto: res.Proto}, nil
}
