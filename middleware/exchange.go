package middleware

import (
	"context"
	"net/http"
	"sync"

	"github.com/idemkit/idem/tiered"
)

// exchange is the state of one guarded request: its body, the capture of
// its response when it leads, and the function handed to the Store. It is
// reused, so that a request costs no allocations of its own for them.
type exchange struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	next func(http.ResponseWriter, *http.Request)
	body body
	cw   capture
	led  bool        // set by run, which the Store calls only for the leader
	run  tiered.Func // x.execute, bound once when x is made
}

// maxPooled bounds the buffers kept for reuse, so that one large body or
// response does not pin its memory.
const maxPooled = 64 << 10

var exchanges = sync.Pool{New: func() any {
	x := &exchange{body: body{buf: make([]byte, 0, 4<<10)}, cw: capture{body: make([]byte, 0, 4<<10)}}
	x.run = x.execute
	return x
}}

func newExchange(h *Handler, w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) *exchange {
	x := exchanges.Get().(*exchange)
	x.h, x.w, x.r, x.next = h, w, r, next
	return x
}

// free returns x for reuse. Nothing may use x afterwards: the Store has
// returned, so the handler has too.
func (x *exchange) free() {
	b, cb, fields := x.body.buf, x.cw.body, x.cw.fields
	if cap(b) > maxPooled {
		b = nil
	}
	if cap(cb) > maxPooled {
		cb = nil
	}
	clear(fields)
	x.h, x.w, x.r, x.next, x.led = nil, nil, nil, nil, false
	x.body.buf = b[:0]
	x.body.rd.Reset(nil)
	x.cw = capture{body: cb[:0], fields: fields[:0]}
	exchanges.Put(x)
}

// execute is the Store's work for the leading request: the handler, run on
// the Store's context with a writer that records as it passes the response
// on to the real one.
func (x *exchange) execute(ctx context.Context) ([]byte, error) {
	x.led = true
	x.cw.reset(x.w, &x.h.c)
	r := x.r.WithContext(ctx)
	r.Body = x.body.reader()
	x.next(&x.cw, r)
	return x.cw.finish(x.h.c.keep)
}
