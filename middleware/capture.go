package middleware

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// capture is the ResponseWriter the leading request's handler writes to. It
// passes everything to the real writer at once (so Flush, Hijack and
// http.ResponseController work) and records the status, the allowed headers
// and the body up to the response limit.
//
// It is used by one goroutine at a time: the Store's goroutine while the
// handler runs, then the request's goroutine once Do has returned.
type capture struct {
	w        http.ResponseWriter
	replay   []string // names to record
	limit    int      // largest body recorded
	status   int      // final status, once wrote
	wrote    bool     // the final header was written
	streamed bool     // Flush was called
	hijacked bool     // the connection was taken over
	oversize bool     // the body passed limit
	fields   []string // recorded name, value pairs
	body     []byte   // recorded body while recording
}

var (
	_ http.Flusher                    = (*capture)(nil)
	_ http.Hijacker                   = (*capture)(nil)
	_ io.ReaderFrom                   = (*capture)(nil)
	_ io.StringWriter                 = (*capture)(nil)
	_ interface{ FlushError() error } = (*capture)(nil)
)

// reset prepares c to record a response to w. Its buffers are kept.
func (c *capture) reset(w http.ResponseWriter, cfg *config) {
	*c = capture{w: w, replay: cfg.replay, limit: cfg.respLimit, fields: c.fields[:0], body: c.body[:0]}
}

// recording reports whether the body is still being recorded.
func (c *capture) recording() bool { return !c.streamed && !c.oversize && !c.hijacked }

// started reports whether any of the response reached the real writer.
func (c *capture) started() bool { return c.wrote || c.streamed || c.hijacked }

// Header returns the real writer's header map.
func (c *capture) Header() http.Header { return c.w.Header() }

// WriteHeader records the status and the allowed headers as they are sent.
// Informational (1xx) headers pass through unrecorded.
func (c *capture) WriteHeader(code int) {
	if !c.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		c.wrote = true
		c.status = code
		c.snapshot()
	}
	c.w.WriteHeader(code)
}

// snapshot records the allowed headers about to be sent. A value with CR,
// LF or NUL is dropped: it could never be replayed safely.
func (c *capture) snapshot() {
	h := c.w.Header()
	for _, name := range c.replay {
		for _, v := range h[name] {
			if validValue(v) {
				c.fields = append(c.fields, name, v)
			}
		}
	}
	if cl := h["Content-Length"]; len(cl) == 1 && c.recording() {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n > int64(c.limit) {
			c.stopRecording(true) // no need to buffer what cannot be kept
		}
	}
}

func (c *capture) stopRecording(oversize bool) {
	if oversize {
		c.oversize = true
	}
	c.body = c.body[:0]
}

func (c *capture) Write(p []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	n, err := c.w.Write(p)
	c.record(p[:n])
	return n, err
}

func (c *capture) WriteString(s string) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	n, err := io.WriteString(c.w, s)
	if c.recording() {
		if len(c.body)+n > c.limit {
			c.stopRecording(true)
		} else {
			c.body = append(c.body, s[:n]...)
		}
	}
	return n, err
}

func (c *capture) record(p []byte) {
	if !c.recording() {
		return
	}
	if len(c.body)+len(p) > c.limit {
		c.stopRecording(true)
		return
	}
	c.body = append(c.body, p...)
}

// ReadFrom copies src through Write while recording; after that it hands
// src to the real writer, which may send it without copying (sendfile).
func (c *capture) ReadFrom(src io.Reader) (int64, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.recording() {
		return io.Copy(writerOnly{c}, src)
	}
	if rf, ok := c.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{c.w}, src)
}

// writerOnly hides every method but Write, so that io.Copy cannot call
// ReadFrom back.
type writerOnly struct{ io.Writer }

// Flush sends what was written so far. The response is then streamed: it is
// stored as a tombstone, never replayed in part.
func (c *capture) Flush() { _ = c.FlushError() }

// FlushError is Flush for http.ResponseController, with the real writer's
// error.
func (c *capture) FlushError() error {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	c.streamed = true
	c.stopRecording(false)
	return http.NewResponseController(c.w).Flush()
}

// Hijack takes over the connection. The response is then unknown: it is
// stored as a tombstone whatever happens next.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(c.w).Hijack()
	if err == nil {
		c.hijacked = true
		c.stopRecording(false)
	}
	return conn, rw, err
}

// Unwrap returns the real writer, for http.ResponseController.
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// ErrNotKept is the error the handler's execution reports to the Store when
// the keep policy refuses the response (by default a 5xx, 408, 425 or 429):
// the Store then releases the key, so that a retry runs the handler again.
// The response still reaches the requests that shared the execution. It
// wraps the status in its text.
var ErrNotKept = errors.New("middleware: response not kept")

// finish ends the capture once the handler has returned and gives the
// stored form of the response, with ErrNotKept when keep refuses it.
func (c *capture) finish(keep func(status int) bool) ([]byte, error) {
	if !c.started() {
		c.WriteHeader(http.StatusOK) // what the server would send anyway
	}
	var flags byte
	switch {
	case c.hijacked:
		flags = flagHijacked
	case c.streamed:
		flags = flagStreamed
	case c.oversize:
		flags = flagOversize
	}
	var enc []byte
	if flags != 0 {
		enc = encode(c.status, flags, nil, nil)
	} else {
		enc = encode(c.status, 0, c.fields, c.body)
	}
	if !c.hijacked && !keep(c.status) {
		return enc, fmt.Errorf("%w: status %d", ErrNotKept, c.status)
	}
	return enc, nil
}
