package redislayer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Timing of the subscription goroutine.
const (
	// pingEvery: a subscription silent this long is pinged, so that a dead
	// connection is noticed and go-redis reconnects it.
	pingEvery = 5 * time.Second
	// retryMin and retryMax bound the pause between failed receives while
	// Redis is unreachable.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// hub shares subscriptions among the waiters of one Layer: one go-redis
// PubSub (one connection) per line, channels subscribed while at least one
// waiter watches them and unsubscribed after the last one leaves. There is
// one line, except over a Ring, which has one line per shard because a
// publish reaches only the shard that owns the channel.
type hub struct {
	client  Client
	shard   func(channel string) (*redis.Client, error) // non-nil over a Ring
	timeout time.Duration                               // the layer's WithTimeout: bounds UNSUBSCRIBE; 0: none

	ctx    context.Context // ends at close; the lines' goroutines run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the lines' goroutines

	mu      sync.Mutex // guards the fields below and every line's pending and watch's fields
	closed  bool
	lines   map[*redis.Client]*line // key nil: the only line
	watches map[string]*watch       // by channel
}

// line is one subscription connection.
type line struct {
	sub func(ctx context.Context, channels ...string) *redis.PubSub

	// opMu serializes SUBSCRIBE and UNSUBSCRIBE on the connection, so that a
	// channel's last unsubscribe and its next subscribe reach Redis in the
	// order the watches came and went.
	opMu sync.Mutex
	ps   *redis.PubSub // nil until the first subscribe; guarded by opMu

	// pending counts SUBSCRIBE commands sent per channel whose confirmation
	// has not arrived (guarded by hub.mu).
	pending map[string]int
}

// watch is the shared state of the waiters of one channel; every field is
// guarded by hub.mu.
type watch struct {
	channel string
	ln      *line
	refs    int
	sent    bool          // our SUBSCRIBE was written
	ev      chan struct{} // closed at the next event, then replaced
}

func newHub(client Client, timeout time.Duration) *hub {
	h := &hub{client: client, timeout: timeout, lines: map[*redis.Client]*line{}, watches: map[string]*watch{}}
	if r, ok := client.(interface {
		GetShardClientForKey(key string) (*redis.Client, error)
	}); ok {
		h.shard = r.GetShardClientForKey
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// fire wakes the waiters of w. h.mu must be held.
func (w *watch) fire() {
	close(w.ev)
	w.ev = make(chan struct{})
}

// acquire registers a waiter on channel, subscribing it if it is the first.
// The caller must call release(w) once, whatever the error.
func (h *hub) acquire(ctx context.Context, channel string) (*watch, error) {
	ln, err := h.line(channel)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, idem.ErrClosed
	}
	w := h.watches[channel]
	if w == nil {
		w = &watch{channel: channel, ln: ln, ev: make(chan struct{})}
		h.watches[channel] = w
	}
	w.refs++
	first := !w.sent
	h.mu.Unlock()
	if !first {
		return w, nil
	}
	ln.opMu.Lock()
	defer ln.opMu.Unlock()
	h.mu.Lock()
	if w.sent || h.closed { // another waiter of w subscribed it meanwhile, or close
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return w, idem.ErrClosed
		}
		return w, nil
	}
	ln.pending[channel]++
	w.sent = true
	start := ln.ps == nil
	h.mu.Unlock()
	if start {
		ln.ps = ln.sub(ctx, channel) // go-redis sends SUBSCRIBE and keeps the channel on reconnect
		h.wg.Go(func() { h.run(ln) })
		return w, nil
	}
	if err := ln.ps.Subscribe(ctx, channel); err != nil {
		// The channel stays in go-redis's set and is subscribed again at the
		// next reconnect; the waiter falls back to reading.
		return w, err
	}
	return w, nil
}

// line returns the line that carries channel, creating it.
func (h *hub) line(channel string) (*line, error) {
	var shard *redis.Client
	sub := h.client.Subscribe
	if h.shard != nil {
		c, err := h.shard(channel)
		if err != nil {
			return nil, err
		}
		shard, sub = c, c.Subscribe
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ln := h.lines[shard]
	if ln == nil {
		ln = &line{sub: sub, pending: map[string]int{}}
		h.lines[shard] = ln
	}
	return ln, nil
}

// release drops a waiter of w and unsubscribes the channel after the last.
func (h *hub) release(w *watch) {
	h.mu.Lock()
	w.refs--
	last := w.refs == 0
	if last && h.watches[w.channel] == w {
		delete(h.watches, w.channel)
	}
	sent := w.sent
	h.mu.Unlock()
	if !last || !sent {
		return
	}
	ln := w.ln
	ln.opMu.Lock()
	defer ln.opMu.Unlock()
	h.mu.Lock()
	again := h.watches[w.channel] != nil // a new waiter came meanwhile and keeps the channel
	closed := h.closed
	h.mu.Unlock()
	if again || closed || ln.ps == nil {
		return
	}
	ctx, cancel := h.ctx, context.CancelFunc(func() {})
	if h.timeout > 0 {
		ctx, cancel = context.WithTimeout(h.ctx, h.timeout)
	}
	_ = ln.ps.Unsubscribe(ctx, w.channel) // on error the connection is reconnected without it
	cancel()
}

// snapshot returns w's current event channel, or closed when the hub is
// closed.
func (h *hub) snapshot(w *watch) (ev <-chan struct{}, closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.ev, h.closed
}

// run receives on ln until the hub closes.
func (h *hub) run(ln *line) {
	pause := retryMin
	for {
		msg, err := ln.ps.ReceiveTimeout(h.ctx, pingEvery)
		if h.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				_ = ln.ps.Ping(h.ctx)
				continue
			}
			// The connection is gone; go-redis reconnects and subscribes
			// again. Messages sent meanwhile are lost, so every waiter
			// reads the record now, and again once the subscription is
			// confirmed.
			h.lost(ln)
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, retryMax)
			continue
		}
		pause = retryMin
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.confirmed(ln, m.Channel)
			}
		case *redis.Message:
			h.event(m.Channel)
		}
	}
}

// confirmed handles Redis's confirmation of a SUBSCRIBE (ours, or go-redis's
// after a reconnect).
func (h *hub) confirmed(ln *line, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := ln.pending[channel]; n > 1 {
		ln.pending[channel] = n - 1
		return // a later SUBSCRIBE of this channel is still on its way
	}
	delete(ln.pending, channel)
	if w := h.watches[channel]; w != nil && w.ln == ln && w.sent {
		w.fire() // publishes reach us from now on: the waiters read again
	}
}

// event wakes the waiters of channel (a completion, release or fill).
func (h *hub) event(channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.watches[channel]; w != nil {
		w.fire()
	}
}

// lost wakes the waiters of ln, so that they read the record. The
// confirmations still owed on the dead connection will never come: go-redis
// subscribes every channel again on the new one.
func (h *hub) lost(ln *line) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(ln.pending)
	for _, w := range h.watches {
		if w.ln == ln {
			w.fire()
		}
	}
}

// close stops every line and wakes every waiter.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for _, w := range h.watches {
		w.fire()
	}
	lines := make([]*line, 0, len(h.lines))
	for _, ln := range h.lines {
		lines = append(lines, ln)
	}
	h.mu.Unlock()
	h.cancel()
	for _, ln := range lines {
		ln.opMu.Lock()
		if ln.ps != nil {
			_ = ln.ps.Close()
		}
		ln.opMu.Unlock()
	}
	h.wg.Wait()
}
