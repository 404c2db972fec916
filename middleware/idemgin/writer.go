package idemgin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// writer is the gin.ResponseWriter that handlers after the middleware write
// to when the core runs them. It keeps gin's semantics (WriteHeader only
// records the status until the first write or WriteHeaderNow) on top of the
// core's writer w, which records the response and passes it on to gin's
// own writer.
type writer struct {
	w      http.ResponseWriter // the core's writer
	orig   gin.ResponseWriter  // gin's writer, for CloseNotify and Pusher
	status int
	set    bool // a handler set the status
	size   int  // -1 until the header is written
}

var _ gin.ResponseWriter = (*writer)(nil)

var errHijackAfterBody = errors.New("idemgin: response body already written")

func (w *writer) Header() http.Header { return w.w.Header() }

func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status, w.set = code, true
	}
}

func (w *writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.w.WriteHeader(w.status)
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.w.Write(p)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.w, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int   { return w.status }
func (w *writer) Size() int     { return w.size }
func (w *writer) Written() bool { return w.size != -1 }

// Hijack is allowed before any body byte was written, as in gin.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.size > 0 {
		return nil, nil, errHijackAfterBody
	}
	if w.size < 0 {
		w.size = 0
	}
	return http.NewResponseController(w.w).Hijack()
}

func (w *writer) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.w).Flush()
}

// CloseNotify is gin's; it is deprecated in net/http.
func (w *writer) CloseNotify() <-chan bool { return w.orig.CloseNotify() }

func (w *writer) Pusher() http.Pusher { return w.orig.Pusher() }

// Unwrap returns the core's writer, for http.ResponseController.
func (w *writer) Unwrap() http.ResponseWriter { return w.w }
