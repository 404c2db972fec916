package middleware

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/reservation"
	"github.com/idemkit/idem/tiered"
)

// exchange is the state of one guarded request: its body, the capture of
// its response when it leads, and the function handed to the Store. It is
// reused, so that a request costs no allocations of its own for them.
type exchange struct {
	h       *Handler
	w       http.ResponseWriter
	r       *http.Request
	next    func(http.ResponseWriter, *http.Request)
	body    body
	capture capture
	work    tiered.Func            // x.runHandler, bound once when x is made
	freeze  func() ([]byte, error) // x.freezeResponse, bound once when x is made

	// The Store may run the handler on a goroutine of its own, and the
	// request may end (its client gone) while it waits; the handler must
	// then either never start or finish before Serve returns, since it uses
	// w, r and the framework's pooled context. state moves by compare and
	// swap: a handler that runs while no one waits for it costs no lock.
	state atomic.Uint32 // where the handler is: a runState
	mu    sync.Mutex    // guards ended, and the moves from and to waited
	ended chan struct{} // closed when the handler returns; made by a waiter
}

// runState is where the handler of an exchange is.
type runState = uint32

const (
	notRun    runState = iota // the Store has not called work
	running                   // the handler runs
	waited                    // the handler runs, and the request waits on ended
	ran                       // the handler returned
	abandoned                 // the request ended first: the handler must not start
)

// errAbandoned is what the execution of a request whose client left before
// its handler could start reports to the Store: the key is released, and
// requests that joined it ask the Store again.
var errAbandoned = errors.New("middleware: the request ended before its handler started")

// maxPooled bounds the buffers kept for reuse, so that one large body or
// response does not pin its memory.
const maxPooled = 64 << 10

var exchanges = sync.Pool{New: func() any {
	x := &exchange{body: body{buf: make([]byte, 0, 4<<10)}, capture: capture{body: make([]byte, 0, 4<<10)}}
	x.work = x.runHandler
	x.freeze = x.freezeResponse
	return x
}}

func newExchange(h *Handler, w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) *exchange {
	x := exchanges.Get().(*exchange)
	x.h, x.w, x.r, x.next = h, w, r, next
	return x
}

// free returns x for reuse, unless the Store may still call x.work (a
// request abandoned before its handler started): that one is left to the
// garbage collector. Nothing may use x afterwards.
func (x *exchange) free() {
	if x.state.Load() == abandoned {
		return
	}
	b, cb, fields := x.body.buf, x.capture.body, x.capture.fields
	if cap(b) > maxPooled {
		b = nil
	}
	if cap(cb) > maxPooled {
		cb = nil
	}
	clear(fields)
	x.h, x.w, x.r, x.next = nil, nil, nil, nil
	x.state.Store(notRun)
	x.ended = nil
	x.body.buf = b[:0]
	x.body.rd.Reset(nil)
	x.capture = capture{saved: x.capture.saved, body: cb[:0], fields: fields[:0]}
	exchanges.Put(x)
}

// runHandler is the Store's work for the leading request: the handler, run
// on the Store's context with a writer that holds the response until the
// Store has decided.
func (x *exchange) runHandler(ctx context.Context) ([]byte, error) {
	if !x.state.CompareAndSwap(notRun, running) { // abandoned
		return nil, errAbandoned
	}
	defer x.handlerReturned()
	x.capture.reset(x.w, &x.h.c)
	x.capture.hold = x.h.atomic
	if res, ok := idem.ReservationFrom(ctx); ok {
		// A completion in the handler's own transaction stores the
		// response the handler wrote until then; and a handler that takes
		// its reservation answers only through such a completion.
		st := reservation.Of(res)
		_ = st.SetResultFunc(x.freeze) // a fresh reservation: none is set
		st.RequireCompletion()
	}
	r := x.r.WithContext(ctx)
	r.Body = x.body.reader()
	x.next(&x.capture, r)
	return x.capture.finish(x.h.c.keep)
}

// freezeResponse is the result function of the reservation: it freezes the
// response the handler wrote and returns its stored form. It runs on the
// goroutine of the handler that completes.
func (x *exchange) freezeResponse() ([]byte, error) { return x.capture.freeze(x.h.c.keep) }

func (x *exchange) handlerReturned() {
	if x.state.CompareAndSwap(running, ran) {
		return // no one waits
	}
	x.mu.Lock() // waited: the waiter made ended before it moved there
	x.state.Store(ran)
	close(x.ended)
	x.mu.Unlock()
}

// settle is called once Do has returned. It reports whether this request
// led the execution (its handler ran), after waiting for a handler that
// still runs. early says that the request ended, so Do may have returned
// before the Store called work: a handler that has not started then never
// will, and x stays the Store's (free leaves it alone).
func (x *exchange) settle(early bool) (led bool) {
	for {
		switch x.state.Load() {
		case notRun:
			if !early || x.state.CompareAndSwap(notRun, abandoned) {
				return false
			}
			// The handler started meanwhile: look again.
		case running:
			x.mu.Lock()
			ended := make(chan struct{})
			x.ended = ended
			if x.state.CompareAndSwap(running, waited) {
				x.mu.Unlock()
				<-ended
				return true
			}
			x.ended = nil // it returned meanwhile: look again
			x.mu.Unlock()
		default: // ran: waited and abandoned are settle's own, and it runs once
			return true
		}
	}
}
