package middleware

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"

	"github.com/idemkit/idem"
)

// capture is the ResponseWriter the leading request's handler writes to. It
// holds the response back until the Store has decided: the leader's client
// must get its response only once the deciding tier accepted it, as every
// other caller does, so that no client sees a response whose record is then
// lost (its completion refused after an outage, say). It records the
// status, the allowed headers as they are when the status is written, and
// the body up to the response limit, and gives their stored form.
//
// The leader's client is then answered from that stored form — the record
// the Store kept, or the one the handler's transaction committed — through
// the same code as every replay (Handler.answer): a header changed after
// the status was written, through a header map taken earlier or after the
// response was frozen, reaches no one, and neither do the headers the
// replay allow-list leaves out. Nothing the handler does reaches the client
// on its own while the response is held.
//
// The handler sets its headers on w's own header map, which nothing sends
// before the status: the held status and body are what keep the response
// back. Before the leader is answered — from the record, or with a problem
// in the response's place — w's header map is put back as the handler found
// it (restoreHeader), so that none of the handler's own headers reaches the
// client except through the record.
//
// A response that cannot be held — flushed, hijacked, or larger than the
// limit — goes live: what was held is sent, and the rest passes straight to
// the real writer. Such a response is stored as a tombstone, never replayed.
//
// It is used by one goroutine at a time: the handler's while it runs, then
// the request's once Do has returned.
type capture struct {
	w        http.ResponseWriter
	saved    http.Header // w's header as the handler found it, when not empty
	replay   []string    // names to record
	limit    int         // largest body recorded; 0: no limit
	status   int         // final status, once wrote
	wrote    bool        // the final header was written (held, or live)
	live     bool        // the response went to the real writer
	streamed bool        // Flush was called, and the response went live
	hold     bool        // the Store is atomic: Flush holds, nothing leaves before the commit
	hijacked bool        // the connection was taken over
	oversize bool        // the body passed limit
	fields   []string    // recorded name, value pairs
	body     []byte      // the held body, while recording
	frozen   []byte      // the stored form, once frozen; then nothing more is written
}

var (
	_ http.Flusher                    = (*capture)(nil)
	_ http.Hijacker                   = (*capture)(nil)
	_ io.ReaderFrom                   = (*capture)(nil)
	_ io.StringWriter                 = (*capture)(nil)
	_ interface{ FlushError() error } = (*capture)(nil)
)

// reset prepares c to record a response to w. Its buffers are kept. The
// handler starts from the headers already set on w (by middleware that ran
// before this one), which c keeps a copy of for restoreHeader.
func (c *capture) reset(w http.ResponseWriter, cfg *config) {
	saved := c.saved
	if len(saved) > 0 {
		clear(saved)
	}
	if wh := w.Header(); len(wh) > 0 {
		if saved == nil {
			saved = make(http.Header, len(wh))
		}
		maps.Copy(saved, wh)
	}
	*c = capture{w: w, saved: saved, replay: cfg.replay, limit: cfg.responseLimit, fields: c.fields[:0], body: c.body[:0]}
}

// recording reports whether the body is still being recorded.
func (c *capture) recording() bool { return !c.streamed && !c.oversize && !c.hijacked }

// started reports whether any of the response reached the real writer.
func (c *capture) started() bool { return c.live }

// Header returns w's header map. Once the response is frozen it returns a
// map of its own, which changes nothing.
func (c *capture) Header() http.Header {
	if c.frozen != nil {
		return http.Header{}
	}
	return c.w.Header()
}

// WriteHeader records the status and the allowed headers. Informational
// (1xx) headers go out at once, unrecorded.
func (c *capture) WriteHeader(code int) {
	if c.frozen != nil {
		return // the response is decided: see ErrResponseFrozen
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		c.w.WriteHeader(code)
		return
	}
	if c.wrote {
		if c.live {
			c.w.WriteHeader(code) // superfluous: let the server say so
		}
		return
	}
	c.wrote = true
	c.status = code
	c.snapshot()
	if code == http.StatusSwitchingProtocols {
		c.goLive() // the connection changes hands: nothing to hold
	}
}

// snapshot records the allowed headers of the response. A value with CR, LF
// or NUL is dropped: it could never be replayed safely.
func (c *capture) snapshot() {
	h := c.Header()
	for _, name := range c.replay {
		for _, v := range h[name] {
			if validValue(v) {
				c.fields = append(c.fields, name, v)
			}
		}
	}
	if cl := h["Content-Length"]; len(cl) == 1 && c.recording() {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && c.limit > 0 && n > int64(c.limit) {
			c.oversize = true // no need to hold what cannot be kept
			c.goLive()
		}
	}
}

// restoreHeader puts w's header map back as the handler found it, for a
// problem answered in place of a held response. Nothing of the response
// may have gone out.
func (c *capture) restoreHeader() {
	dst := c.w.Header()
	for k := range dst {
		if _, ok := c.saved[k]; !ok {
			delete(dst, k)
		}
	}
	maps.Copy(dst, c.saved)
}

// goLive sends what is held and passes the rest of the response straight to
// the real writer. It ends recording: a live response is not replayable.
func (c *capture) goLive() {
	if c.live {
		return
	}
	c.live = true
	if c.wrote {
		c.w.WriteHeader(c.status)
	}
	if len(c.body) > 0 {
		_, _ = c.w.Write(c.body)
	}
	c.body = c.body[:0]
}

func (c *capture) Write(p []byte) (int, error) {
	if c.frozen != nil {
		return 0, ErrResponseFrozen
	}
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.live {
		return c.w.Write(p)
	}
	if c.over(len(p)) {
		c.oversize = true
		c.goLive()
		return c.w.Write(p)
	}
	c.body = append(c.body, p...)
	return len(p), nil
}

func (c *capture) WriteString(s string) (int, error) {
	if c.frozen != nil {
		return 0, ErrResponseFrozen
	}
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.live {
		return io.WriteString(c.w, s)
	}
	if c.over(len(s)) {
		c.oversize = true
		c.goLive()
		return io.WriteString(c.w, s)
	}
	c.body = append(c.body, s...)
	return len(s), nil
}

// ReadFrom copies src through Write while holding; once live, it hands src
// to the real writer, which may send it without copying (sendfile).
func (c *capture) ReadFrom(src io.Reader) (int64, error) {
	if c.frozen != nil {
		return 0, ErrResponseFrozen
	}
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if !c.live && c.limit == 0 {
		return io.Copy(writerOnly{c}, src) // no limit: hold it all
	}
	if !c.live {
		// Hold up to the limit; one byte more makes the response live.
		room := int64(c.limit-len(c.body)) + 1
		n, err := io.Copy(writerOnly{c}, io.LimitReader(src, room))
		if err != nil || n < room {
			return n, err
		}
		m, err := c.ReadFrom(src)
		return n + m, err
	}
	if rf, ok := c.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{c.w}, src)
}

// over reports whether n more bytes would take the held body past the
// limit.
func (c *capture) over(n int) bool { return c.limit > 0 && len(c.body)+n > c.limit }

// writerOnly hides every method but Write, so that io.Copy cannot call
// ReadFrom back.
type writerOnly struct{ io.Writer }

// Flush sends what was written so far. The response is then streamed: it is
// stored as a tombstone, never replayed in part. Behind a Store in the
// atomic mode (tiered.WithAtomic) it sends nothing: no byte of the response
// may leave before the transaction that holds the work commits, so the
// response is held whole, and stored whole.
func (c *capture) Flush() { _ = c.FlushError() }

// FlushError is Flush for http.ResponseController, with the real writer's
// error.
func (c *capture) FlushError() error {
	if c.frozen != nil {
		return ErrResponseFrozen
	}
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.hold && !c.live {
		return nil
	}
	c.streamed = true
	c.goLive()
	return http.NewResponseController(c.w).Flush()
}

// Hijack takes over the connection. The response is then unknown: it is
// stored as a tombstone whatever happens next.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if c.frozen != nil {
		return nil, nil, ErrResponseFrozen
	}
	conn, rw, err := http.NewResponseController(c.w).Hijack()
	if err == nil {
		c.hijacked = true
		c.live = true
		c.body = c.body[:0]
	}
	return conn, rw, err
}

// Unwrap returns the real writer, for http.ResponseController (deadlines,
// full duplex).
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// ErrNotKept is the error the handler's execution reports to the Store when
// the keep policy refuses the response (by default a 5xx, 408, 425 or 429):
// the Store then releases the key, so that a retry runs the handler again.
// The response still reaches the requests that shared the execution. It
// wraps the status in its text.
var ErrNotKept = errors.New("middleware: response not kept")

// ErrNoResponse is the error the handler's execution reports to the Store
// when the handler returned without writing anything: net/http would send
// an empty 200, but a handler that wrote nothing (it logged an error and
// returned, say) has decided nothing, and an empty 200 must not become the
// key's answer for its whole retention. The key is released, the client
// gets a 500 problem (ProblemFailed), and a retry runs the handler again.
// To answer an empty 200 on purpose, call WriteHeader(http.StatusOK).
var ErrNoResponse = errors.New("middleware: the handler returned without writing a response; nothing is stored")

// finish ends the capture once the handler has returned and gives the
// stored form of the response, with ErrNotKept when keep refuses it and
// ErrNoResponse when the handler wrote nothing.
func (c *capture) finish(keep func(status int) bool) ([]byte, error) {
	if c.frozen != nil {
		return c.frozen, nil
	}
	if !c.wrote && !c.hijacked {
		return nil, ErrNoResponse
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

// ErrResponseFrozen is what writing to the response returns (Write,
// WriteString, ReadFrom, Flush through http.ResponseController, Hijack)
// once the handler completed its reservation in its own transaction
// (sqllayer's CompleteReservation with a nil result): the response written
// until then is the one stored, the one its client gets and the one every
// retry replays, so nothing may change it. WriteHeader is ignored and
// Header returns a map that changes nothing. Write the whole response
// before completing. When the transaction does not commit, the middleware
// answers a 500 problem in the response's place.
var ErrResponseFrozen = errors.New("middleware: the response is frozen: the handler completed its reservation with the response written before")

// freeze ends the response when the handler completes its reservation in
// its own transaction and returns its stored form, which finish returns
// from then on. A response the keep policy refuses is not frozen (ErrNotKept):
// it must not be stored. Nothing written yet is a mistake of the handler's.
func (c *capture) freeze(keep func(status int) bool) ([]byte, error) {
	if c.frozen != nil {
		return c.frozen, nil
	}
	if !c.wrote && !c.hijacked {
		return nil, fmt.Errorf("%w: middleware: no response written yet: write the response, then complete the reservation (the response written is what is stored)", idem.ErrConfig)
	}
	enc, err := c.finish(keep)
	if err != nil {
		return nil, err
	}
	c.frozen = enc
	return enc, nil
}
