package middleware

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/tiered"
)

// Handler is the framework-free core of the middleware: every decision is
// made here, and the adapters (net/http and chi through New, Gin in idemgin,
// Echo in idemecho) only translate. Build it once with NewHandler; it is
// safe for concurrent use.
type Handler struct {
	store *tiered.Store
	c     config
}

// NewHandler returns the core configured by opts over the defaults listed on
// each option. A nil store and options given nonsense make it fail with one
// error that names each fault and wraps idem.ErrConfig.
func NewHandler(store *tiered.Store, opts ...Option) (*Handler, error) {
	c := defaults()
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("nil store"))
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: middleware: %w", idem.ErrConfig, err)
	}
	if c.fp == nil {
		fp, err := fingerprint.New() // the defaults: it cannot fail
		if err != nil {
			return nil, fmt.Errorf("%w: middleware: the default fingerprint: %w", idem.ErrConfig, err)
		}
		c.fp = fp
	}
	return &Handler{store: store, c: c}, nil
}

// New returns net/http middleware that executes each guarded request once
// per key (see the package documentation). It is chi middleware as it is:
// router.Use(mw) with mw, err := middleware.New(store). Its errors are
// NewHandler's.
func New(store *tiered.Store, opts ...Option) (func(http.Handler) http.Handler, error) {
	h, err := NewHandler(store, opts...)
	if err != nil {
		return nil, err
	}
	return h.wrap, nil
}

// wrap puts h in front of next: the net/http middleware New returns.
func (h *Handler) wrap(next http.Handler) http.Handler {
	serve := next.ServeHTTP
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Serve(w, r, serve) })
}

// Serve handles one request: it passes it to next untouched, runs next once
// for its key and records the response, replays a stored response, or
// answers a problem. next must write to the writer and read the request it
// is given: they are not w and r when next runs as the key's execution
// (the request then carries the Store's work context, which keeps r's
// values but not its cancellation, and a body that replays what was read).
//
// Serve returns once the response is complete. When next panics after it
// began its response, Serve panics with http.ErrAbortHandler, so that the
// server drops the connection rather than finish a broken response.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) {
	if !h.guards(r.Method) {
		next(w, r)
		h.answered(r, AnswerPassed, 0, 0)
		return
	}
	var clientKey string
	if vals := r.Header[h.c.keyHeader]; len(vals) > 0 {
		k, err := ParseKeyHeader(vals)
		if err != nil {
			h.fail(w, r, problemKeyMalformed, err)
			return
		}
		clientKey = k
	} else if !h.c.derive {
		if h.c.require {
			h.fail(w, r, problemKeyMissing, ErrNoKey)
			return
		}
		next(w, r)
		h.answered(r, AnswerPassed, 0, 0)
		return
	}
	x := newExchange(h, w, r, next)
	defer x.free()
	if err := x.body.read(r, h.c.bodyLimit); err != nil {
		if errors.Is(err, errBodyTooLarge) {
			h.fail(w, r, problemBodyTooLarge, err)
		} else {
			h.fail(w, r, problemBodyInvalid, err)
		}
		return
	}
	fp, err := h.c.fp.RequestBody(r, x.body.buf)
	if err != nil {
		h.fail(w, r, fingerprintProblem(err), err)
		return
	}
	if clientKey == "" {
		// A client key is printable ASCII, so this one can never equal it.
		clientKey = "\x00derived:" + fp
	}
	var scope string
	if h.c.scope != nil {
		scope = h.c.scope(r)
	}
	h.runOnce(x, idem.NewKey(scope, clientKey), fp)
}

func (h *Handler) guards(method string) bool {
	for _, m := range h.c.methods {
		if m == method {
			return true
		}
	}
	return false
}

// runOnce runs the request through the Store, once per key. Only the work
// of the request that starts the execution runs (the leader): it calls next
// with a
// writer that holds the response until the Store has decided, and the
// leader then sends it — or, when the Store could not keep it, a problem in
// its place. Every other request gets the stored response, or a problem.
// Do is given the request's context: a duplicate stops waiting when its
// request ends, as it does for an owner on another instance, while the work
// goes on detached. A leader whose handler runs is waited for: nothing
// touches w, r or the framework's context once Serve is gone.
func (h *Handler) runOnce(x *exchange, key idem.Key, fp string) {
	w, r := x.w, x.r
	for {
		res, err := h.store.Do(r.Context(), key, fp, x.work)
		if x.settle(r.Context().Err() != nil) {
			h.answerLeader(x, err)
			return
		}
		if errors.Is(err, errAbandoned) && r.Context().Err() == nil {
			// The request this one joined ended before its handler could
			// start: ask again, and lead if no one else does.
			continue
		}
		if res.Value != nil && (err == nil || errors.Is(err, ErrNotKept) || errors.Is(err, tiered.ErrNotReplayable)) {
			// The stored response, or the response of the execution this
			// request shared (its failure, which the policy did not keep).
			h.replay(w, r, res.Value, err != nil)
			return
		}
		h.fail(w, r, storeProblem(err), err)
		return
	}
}

// answerLeader sends the leader's own response once the Store has decided:
// as the handler wrote it when the Store kept it or the keep policy refused
// it (err wraps ErrNotKept), and a problem in its place when the Store could
// not keep it — so that the client never gets a response whose record is
// lost. A response that went live (streamed, hijacked, oversized) is out
// already.
func (h *Handler) answerLeader(x *exchange, err error) {
	w, r := x.w, x.r
	if pe := panicOf(err); pe != nil {
		if x.capture.started() || pe.Value == http.ErrAbortHandler {
			abort(w, x.capture.hijacked)
		}
		x.capture.restoreHeader()
		h.fail(w, r, problemFailed, err)
		return
	}
	if x.capture.started() || (!errors.Is(err, tiered.ErrNotCommitted) &&
		(err == nil || errors.Is(err, ErrNotKept) || errors.Is(err, tiered.ErrNotReplayable))) {
		x.capture.send()
		h.answered(r, AnswerExecuted, x.capture.status, 0)
		return
	}
	// The handler ran, but the Store has not kept its response (it could
	// not store it yet, or another owner took over): answer as for a
	// duplicate, which a retry then resolves.
	x.capture.restoreHeader()
	h.fail(w, r, storeProblem(err), err)
}

// panicOf returns the panic err reports, or nil. It does not allocate when
// err is nil, the common case.
func panicOf(err error) *tiered.PanicError {
	if err == nil {
		return nil
	}
	var pe *tiered.PanicError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}
