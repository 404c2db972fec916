//go:build unix

package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/reliability/internal/history"
)

// One request of the soak's client, as the history records it: a call
// served by the child it went to, with its outcome mapped from the HTTP
// answer, and the behaviour it asked of the handler recorded as a fault.

// faultOf is the fault kind a behaviour counts as.
func faultOf(b behaviour) history.FaultKind {
	switch b {
	case behaveSlow:
		return history.SlowWork
	case behaveFail:
		return history.WorkError
	case behavePanic, behavePanicLate, behaveMWPanic:
		return history.WorkPanic
	}
	return ""
}

// call sends one request for key k with body i to p, records it, and
// returns its outcome.
func (l *load) call(ctx context.Context, k *soakKey, i int, p *proc, b behaviour) history.Outcome {
	body := k.body(i)
	c := l.rec.InvokeOn(p.node, k.name, body.meaning)
	l.calls.Add(1)
	var f *history.FaultSpan
	if kind := faultOf(b); kind != "" {
		f = l.rec.Fault(kind, p.node, string(b)+" for "+c.ID())
	}
	out, val, err := l.send(ctx, k, body, p, b, c.ID())
	c.Return(out, val, err)
	if f != nil {
		f.End()
	}
	return out
}

// send makes the request and maps the answer to an outcome, with the
// value (the response body of a success or of the handler's own failure)
// and the error's text.
func (l *load) send(ctx context.Context, k *soakKey, body soakBody, p *proc, b behaviour, call string) (history.Outcome, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.api+routePath(k.route), bytes.NewReader(body.raw))
	if err != nil {
		return history.OtherError, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(middleware.DefaultKeyHeader, k.name)
	req.Header.Set(hdrCall, call)
	if b != behaveOK {
		req.Header.Set(hdrBehaviour, string(b))
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return history.Canceled, nil, err
		}
		return history.OtherError, nil, fmt.Errorf("transport: %w", err)
	}
	defer resp.Body.Close()
	v, err := io.ReadAll(resp.Body)
	if err != nil { // a cut connection: the client has no answer
		return history.OtherError, nil, fmt.Errorf("transport: %d and a broken body: %w", resp.StatusCode, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		var pr middleware.Problem
		_ = json.Unmarshal(v, &pr)
		err := fmt.Errorf("%d %s", resp.StatusCode, strings.TrimPrefix(pr.Type, "https://pkg.go.dev/github.com/idemkit/idem/middleware#"))
		switch pr.Type {
		case middleware.ProblemInFlight:
			return history.InFlight, nil, err
		case middleware.ProblemMismatch:
			return history.Mismatch, nil, err
		case middleware.ProblemUnavailable:
			return history.Unavailable, nil, err
		case middleware.ProblemNotReplayable:
			return history.NotReplayable, nil, err
		case middleware.ProblemBodyInvalid:
			return history.Rejected, nil, err
		case middleware.ProblemFailed:
			// The handler panicked: this request's, or the one it joined
			// in its process.
			return history.Panicked, nil, err
		}
		return history.OtherError, nil, err
	}
	// Any other answer is the handler's (or its record's): the client
	// records what it got, status, replayed headers and body. A status
	// the middleware keeps is an answer to the operation, replayed until
	// the merged history shows this call's own execution
	// (linkExecutions); one that releases the key is the handler's own
	// failure.
	got := answerBytes(resp.StatusCode, resp.Header, v)
	if released(resp.StatusCode) {
		return history.FnFailed, got, fmt.Errorf("%d from the handler", resp.StatusCode)
	}
	return history.Replayed, got, nil
}

// released reports whether the middleware releases the key on status:
// 5xx, 408, 425 and 429 (DESIGN §4).
func released(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// callAside makes a call that may take long (slow work) on a goroutine
// of its own, so that the worker goes on: it waits only when too many such
// calls run already. Slow work asked for too near the load's end is asked
// for without the slowness.
func (l *load) callAside(ctx context.Context, k *soakKey, i int, p *proc, b behaviour) {
	if time.Now().UnixNano() > l.noSlowAfter.Load() {
		l.call(ctx, k, i, p, behaveOK)
		return
	}
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	l.bg.Go(func() {
		defer func() { <-l.slots }()
		l.call(ctx, k, i, p, b)
	})
}

// settle retries k's body i until the client has an answer that ends the
// operation (success, a mismatch, a rejection), as a client does: at
// most tries requests, after a short pause when told to retry later.
func (l *load) settle(ctx context.Context, r *rand.Rand, k *soakKey, i, tries int, out history.Outcome) history.Outcome {
	for ; tries > 0 && ctx.Err() == nil; tries-- {
		switch out {
		case history.Executed, history.Replayed, history.Mismatch, history.Rejected, history.NotReplayable:
			return out
		case history.InFlight, history.Unavailable:
			sleepCtx(ctx, time.Duration(50+r.IntN(250))*time.Millisecond)
		}
		out = l.call(ctx, k, i, l.node(r), behaveOK)
	}
	return out
}

// sleepCtx sleeps d or until ctx ends: the client's pause before a retry.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
