package middleware

import (
	"errors"
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/fingerprint"
	"github.com/idemkit/idem/internal/option"
	"github.com/idemkit/idem/tiered"
)

// Handler is the framework-free core of the middleware: every decision is
// made here, and the adapters (net/http and chi through New, Gin in idemgin,
// Echo in idemecho) only translate. Build it once with NewHandler; it is
// safe for concurrent use.
type Handler struct {
	store  *tiered.Store
	c      config
	atomic bool // the Store is atomic: responses are held until the commit (see capture.Flush)
}

// NewHandler returns the core configured by opts over the defaults listed on
// each option. A nil store and options given nonsense make it fail with one
// error that names each fault and wraps idem.ErrConfig.
func NewHandler(store *tiered.Store, opts ...Option) (*Handler, error) {
	c := defaults()
	errs := option.Apply(&c, opts)
	if store == nil {
		errs = append(errs, errors.New("New: give a store (got nil)"))
	}
	if !c.scoped {
		errs = append(errs, errNoScope)
	}
	fp, err := fingerprint.New(c.fpOpts...)
	if err != nil {
		errs = append(errs, option.Nested("WithFingerprint", err))
	}
	c.fp = fp
	if err := option.Refuse("middleware", errs...); err != nil {
		return nil, err
	}
	return &Handler{store: store, c: c, atomic: store.Atomic()}, nil
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
	if !h.Guards(r.Method) {
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
		if scope = h.c.scope(r); scope == "" {
			h.fail(w, r, problemScopeMissing, errScopeMissing)
			return
		}
	}
	h.runOnce(x, idem.NewKey(scope, clientKey), fp)
}

// Guards reports whether requests of method are guarded (WithMethods):
// Serve passes every other request to next untouched. Adapters use it to
// spend nothing on a request the core will not look at.
func (h *Handler) Guards(method string) bool {
	for _, m := range h.c.methods {
		if m == method {
			return true
		}
	}
	return false
}

// runOnce runs the request through the Store, once per key. Only the work
// of the request that starts the execution runs (the leader): it calls next
// with a writer that holds the response until the Store has decided. Every
// request, the leader's included, is then answered by answer from what the
// Store returned: the record's response, or a problem. Do is given the
// request's context: a duplicate stops waiting when its request ends, as it
// does for an owner on another instance, while the work goes on detached. A
// leader whose handler runs is waited for: nothing touches w, r or the
// framework's context once Serve is gone.
func (h *Handler) runOnce(x *exchange, key idem.Key, fp string) {
	r := x.r
	for {
		res, err := h.store.Do(r.Context(), key, fp, x.work)
		led := x.settle(r.Context().Err() != nil)
		if !led && errors.Is(err, errAbandoned) && r.Context().Err() == nil {
			// The request this one joined ended before its handler could
			// start: ask again, and lead if no one else does.
			continue
		}
		h.answer(x, led, res, err)
		return
	}
}

// answer writes the answer to one request once Do has returned res and err:
// the one place where an answer is decided, for the leader (led: its
// handler ran) as for every duplicate. A response is always sent from its
// stored form — res.Value, what the Store kept or the handler's
// transaction committed — so that the leader's client gets byte for byte
// what every retry gets. Only a response that went live (streamed,
// hijacked, oversized) reached the leader's client already.
func (h *Handler) answer(x *exchange, led bool, res tiered.Result, err error) {
	w, r := x.w, x.r
	if led {
		if pe := panicOf(err); pe != nil && (x.capture.started() || pe.Value == http.ErrAbortHandler) {
			abort(w, x.capture.hijacked) // panics with http.ErrAbortHandler
		}
		if x.capture.started() {
			h.answered(r, AnswerExecuted, x.capture.status, 0)
			return
		}
		// Nothing of the response went out: the handler's own headers go
		// only through the record.
		x.capture.restoreHeader()
	}
	if res.Value != nil && (err == nil || errors.Is(err, ErrNotKept) || errors.Is(err, tiered.ErrNotReplayable)) {
		// The stored response, or the response of the execution this
		// request shared (its failure, which the policy did not keep).
		kind := AnswerReplayed
		if led {
			kind = AnswerExecuted
		}
		h.replay(w, r, res.Value, err != nil, kind)
		return
	}
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
