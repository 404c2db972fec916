package idemwatermill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// New returns router middleware that runs each message once per identity
// and consumer over store (see the package documentation). A nil store and
// options given nonsense make it fail with one error that names each fault
// and wraps idem.ErrConfig.
func New(store *tiered.Store, opts ...Option) (message.HandlerMiddleware, error) {
	c := defaults()
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("New: give a store (got nil)"))
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	identify, err := c.identity.build()
	if err != nil {
		errs = append(errs, fmt.Errorf("WithIdentity: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: idemwatermill: %w", idem.ErrConfig, err)
	}
	m := &middleware{store: store, c: c, identify: identify}
	return m.wrap, nil
}

type middleware struct {
	store    *tiered.Store
	c        config
	identify identify
}

func (m *middleware) wrap(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		return m.handle(h, msg)
	}
}

// handle runs one delivery of msg.
func (m *middleware) handle(h message.HandlerFunc, msg *message.Message) ([]*message.Message, error) {
	id, fp, err := m.identify(msg)
	if err != nil {
		return nil, err
	}
	scope := m.c.consumer
	if scope == "" {
		scope = message.HandlerNameFromCtx(msg.Context())
	}
	key := idem.NewKey(scope, id)
	run := &run{h: h, msg: msg}
	// The delivery's answer is its execution's, whenever the delivery's
	// context ends (Watermill's Timeout before this middleware): a
	// delivery that gave up while its handler went on would be nacked for
	// an execution that completes, and a middleware before this one that
	// acks errors (PoisonQueue) would drop what it produced. The context
	// can still be cancelled, so that the execution runs on a goroutine of
	// its own; every wait in Do is bounded by the Store (its wait, its
	// tiers' timeouts), and the handler's run by the handler.
	ctx, cancel := context.WithCancel(context.WithoutCancel(msg.Context()))
	defer cancel()
	r, err := m.store.Do(ctx, key, fp, run.fn)
	switch {
	case err == nil:
	case errors.Is(err, tiered.ErrNotReplayable):
		// Processed once; its produced messages were too large to keep.
		// The run that processed it still has them; a duplicate has none.
		if r.Replayed {
			return nil, nil
		}
	case errors.Is(err, idem.ErrInFlight):
		// Another consumer still runs it: redeliver later, never drop.
		m.hold(msg.Context())
		return nil, fmt.Errorf("idemwatermill: message %s: %w", id, err)
	default:
		return nil, fmt.Errorf("idemwatermill: message %s: %w", id, err)
	}
	if r.Replayed && !m.c.republish {
		return nil, nil
	}
	out, err := decode(r.Value)
	if err != nil {
		return nil, err
	}
	if !r.Replayed {
		m.checkReturned(run, r.Value, id)
	}
	return out, nil
}

// hold waits the nack delay, or until ctx ends.
func (m *middleware) hold(ctx context.Context) {
	if m.c.nackDelay <= 0 {
		return
	}
	t := time.NewTimer(m.c.nackDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// checkReturned logs a handler that returned other messages than the
// result recorded for its run (it completed the key in its transaction
// with others): the recorded ones are what every delivery returns.
func (m *middleware) checkReturned(run *run, result []byte, id string) {
	returned := run.returned()
	if len(returned) == 0 {
		return
	}
	enc, err := encode(returned)
	if err == nil && bytes.Equal(enc, result) {
		return
	}
	m.c.logger.Error("idemwatermill: the handler returned other messages than it completed its key with; the completed ones are published",
		err, watermill.LogFields{"message_uuid": id, "returned": len(returned)})
}

// run is one execution of the handler for a message.
type run struct {
	h   message.HandlerFunc
	msg *message.Message

	mu  sync.Mutex
	out []*message.Message // what the handler returned without error
}

// fn is the Store's function: it runs the handler on a copy of the message
// whose context is the execution's, and records what it produced. The
// handler gets a copy because the execution may outlive the delivery (its
// context ended; the Store goes on for the other callers), while the
// router acks or nacks the delivered message: nothing here writes to that
// message once Do has been called.
func (x *run) fn(ctx context.Context) ([]byte, error) {
	if res, ok := idem.ReservationFrom(ctx); ok {
		// A handler that completes its key in its transaction (Complete)
		// answers only through a completion that committed.
		res.RequireCompletion()
	}
	msg := x.msg.Copy()
	msg.SetContext(ctx)
	out, err := x.h(msg)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.out = out
	x.mu.Unlock()
	return encode(out)
}

// returned is what the handler returned, when it returned without error.
func (x *run) returned() []*message.Message {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.out
}
