package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrBodyTooLarge reports a request body without GetBody that is larger
// than WithBodyLimit: it cannot be kept to be sent again. Nothing was sent.
var ErrBodyTooLarge = errors.New("client: request body too large to send again")

// Outcome is what became of one operation.
type Outcome struct {
	// Key is the idempotency key it was sent with, "" for none.
	Key string
	// Attempts is how many times it was sent.
	Attempts int
	// Replayed reports that the answer carries the server's replay marker
	// (WithReplayMarker): it was stored by an earlier attempt, or by
	// another client with the same key.
	Replayed bool
}

type outcomeCtx struct{}

// OutcomeOf returns the Outcome of the operation that resp answers, and
// false for a response that no Transport returned.
func OutcomeOf(resp *http.Response) (Outcome, bool) {
	if resp == nil || resp.Request == nil {
		return Outcome{}, false
	}
	op, ok := resp.Request.Context().Value(outcomeCtx{}).(*operation)
	if !ok {
		return Outcome{}, false
	}
	return op.out, true
}

// bodySource gives each attempt the request's body: the caller's for the
// first, then GetBody's, or the bytes read once.
type bodySource struct {
	req    *http.Request
	buf    []byte // read once, when the request has no GetBody
	buffed bool
	sent   bool // the caller's body went out with the first attempt
}

func (b *bodySource) next() (io.ReadCloser, error) {
	switch {
	case b.buffed:
		return io.NopCloser(bytes.NewReader(b.buf)), nil
	case !b.sent || b.req.GetBody == nil:
		b.sent = true
		return b.req.Body, nil
	}
	return b.req.GetBody()
}

// prepare checks req and gathers what its attempts share: its key, its
// header with the key, a body that can be sent again.
func (t *Transport) prepare(req *http.Request) (*operation, error) {
	c := &t.c
	op := &operation{req: req, header: req.Header, body: bodySource{req: req}}
	key, fromHeader, given := "", false, false
	switch vals := req.Header[c.keyHeader]; {
	case len(vals) > 1:
		return nil, fmt.Errorf("%w: %d %s headers, want one", ErrBadKey, len(vals), c.keyHeader)
	case len(vals) == 1:
		key, fromHeader, given = vals[0], true, true
	default:
		if k, ok := KeyFromContext(req.Context()); ok {
			key, given = k, true
		} else if contains(c.methods, req.Method) {
			key = NewKey()
		}
	}
	if given {
		if err := checkKey(key); err != nil {
			return nil, err
		}
	}
	if key != "" && !fromHeader {
		// A new map over the caller's values, which no RoundTripper changes:
		// the caller's header stays as it was.
		op.header = make(http.Header, len(req.Header)+1)
		for k, v := range req.Header {
			op.header[k] = v
		}
		op.header[c.keyHeader] = []string{key}
	}
	op.out.Key = key
	op.retries = key != "" || idempotent(req.Method)
	if op.retries && c.attempts > 1 && req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, c.bodyLimit+1))
		_ = req.Body.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("client: reading the request body: %w", err)
		case int64(len(b)) > c.bodyLimit:
			return nil, fmt.Errorf("%w: over %d bytes (give the request a GetBody, or raise WithBodyLimit)", ErrBodyTooLarge, c.bodyLimit)
		}
		op.body.buf, op.body.buffed = b, true
	}
	op.ctx = context.WithValue(req.Context(), outcomeCtx{}, op)
	op.deadline = time.Now().Add(c.deadline)
	return op, nil
}

// attempt sends op once, bounded by the attempt timeout and the deadline.
// A response comes with a body that ends the attempt's context when
// closed.
func (t *Transport) attempt(op *operation, n int) (*http.Response, error) {
	timeout := min(t.c.attemptTimeout, time.Until(op.deadline))
	body, err := op.body.next()
	if err != nil {
		return nil, fmt.Errorf("client: GetBody for attempt %d: %w", n, err)
	}
	ctx, cancel := context.WithCancelCause(op.ctx)
	timer := time.AfterFunc(timeout, func() { cancel(ErrAttemptTimeout) })
	r := op.req.WithContext(ctx)
	r.Header = op.header
	r.Body = body
	resp, err := t.base.RoundTrip(r)
	if !timer.Stop() {
		// Fired: the attempt is over even if an answer came at that moment.
		if err == nil {
			discard(resp)
			err = errors.New("its answer came as it timed out")
		}
		cancel(nil)
		if errors.Is(err, ErrAttemptTimeout) { // the base reported the context's cause
			return nil, fmt.Errorf("%w (after %v)", err, timeout)
		}
		return nil, fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, timeout, err)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil {
		return resp, nil // an upgraded connection is the caller's; its context ends with the caller's
	}
	resp.Body = &attemptBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// attemptBody is a response body that ends its attempt's context once it
// is closed or read to its end.
type attemptBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (b *attemptBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *attemptBody) end() { b.once.Do(func() { b.cancel(nil) }) }

// discard reads a little of a body that is not returned, so that its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
