package middleware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errBodyTooLarge reports a request body over the limit.
var errBodyTooLarge = errors.New("middleware: request body too large")

// body is a request body read into a reusable buffer. It is also the reader
// the handler gets in place of r.Body.
type body struct {
	buf []byte
	rd  bytes.Reader
}

// read reads r.Body into b, up to limit bytes (0: no limit). It fails with
// errBodyTooLarge before reading when Content-Length says too much.
func (b *body) read(r *http.Request, limit int64) error {
	if limit > 0 && r.ContentLength > limit {
		return fmt.Errorf("%w: %d bytes, at most %d", errBodyTooLarge, r.ContentLength, limit)
	}
	b.buf = b.buf[:0]
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > 0 && int64(cap(b.buf)) < r.ContentLength+1 {
		b.buf = make([]byte, 0, r.ContentLength+1) // +1 sees EOF without growing
	}
	for {
		if len(b.buf) == cap(b.buf) {
			b.buf = append(b.buf, 0)[:len(b.buf)]
		}
		room := int64(cap(b.buf))
		if limit > 0 {
			room = min(room, limit+1) // read one byte past the limit
		}
		n, err := r.Body.Read(b.buf[len(b.buf):room])
		b.buf = b.buf[:len(b.buf)+n]
		if limit > 0 && int64(len(b.buf)) > limit {
			return fmt.Errorf("%w: more than %d bytes", errBodyTooLarge, limit)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				return fmt.Errorf("%w: %w", errBodyTooLarge, err)
			}
			return fmt.Errorf("middleware: reading the request body: %w", err)
		}
	}
}

// reader returns b as a fresh request body.
func (b *body) reader() io.ReadCloser {
	b.rd.Reset(b.buf)
	return b
}

func (b *body) Read(p []byte) (int, error)         { return b.rd.Read(p) }
func (b *body) WriteTo(w io.Writer) (int64, error) { return b.rd.WriteTo(w) }
func (b *body) Close() error                       { return nil }
