package middleware

import (
	"bufio"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// refusing is a wrapper that refuses to hijack, as gin's writer does once
// the body began; it unwraps to the server's writer.
type refusing struct{ http.ResponseWriter }

func (refusing) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("refusing: body already written")
}
func (w refusing) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func startServer(t *testing.T, h http.Handler, h2 bool) *httptest.Server {
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

// A cut response never completes, even when the handler then returns as
// if nothing happened (a recovery swallowed the panic), over HTTP/1.1 by
// hijacking and over HTTP/2 by resetting the stream, through wrappers that
// refuse what the server allows.
func TestCutNeverCompletes(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, c := range []struct {
			name  string
			wrap  bool
			size  int
			flush bool
		}{
			{"buffered", false, 100, false},
			{"flushed", false, 100, true},
			{"past the buffer", false, 16 << 10, false},
			{"through a refusing wrapper", true, 100, true},
		} {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				cutErr, served := make(chan error, 1), make(chan string, 1)
				srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served <- r.Proto
					if c.wrap {
						w = refusing{w}
					}
					io.WriteString(w, strings.Repeat("x", c.size))
					if c.flush {
						http.NewResponseController(w).Flush()
					}
					cutErr <- cut(w)
					io.WriteString(w, "and the rest") // must not reach the client either
				}), proto == "HTTP/2.0")
				res, err := srv.Client().Post(srv.URL, "text/plain", nil)
				if err == nil {
					var b []byte
					b, err = io.ReadAll(res.Body)
					res.Body.Close()
					if err == nil {
						t.Fatalf("a cut response arrived complete: %s %d, %d bytes", res.Proto, res.StatusCode, len(b))
					}
				}
				if got := <-served; got != proto {
					t.Fatalf("served over %s, want %s", got, proto)
				}
				if err := <-cutErr; err != nil {
					t.Fatalf("cut: %v", err)
				}
			})
		}
	}
}

// A writer that cannot cut says so; abort still panics for the server.
func TestCutUnsupported(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := cut(refusing{rec}); !errors.Is(err, errCannotCut) {
		t.Fatalf("cut over a recorder: %v, want errCannotCut", err)
	}
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	abort(rec, false)
}

// A connection the handler took over is the handler's: cut leaves it
// alone, so that what the handler still writes on it arrives.
func TestCutLeavesHijacked(t *testing.T) {
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		if err := cut(w); err != nil {
			panic(err)
		}
		io.WriteString(brw, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		brw.Flush()
	}), false)
	res, err := srv.Client().Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, err := io.ReadAll(res.Body); err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
}
