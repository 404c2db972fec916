package tiered

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

// health tracks whether the Redis tier is worth asking. After maxFailures
// failures in a row it is skipped for cooldown; then one call at a time
// probes it, and the first success switches it back on. maxFailures 0 never
// switches it off.
type health struct {
	maxFailures int
	cooldown    time.Duration
	obs         idem.Observer

	// clean is true while there is nothing to track: on, no failure since
	// the last success, no probe. Every call reads it; only a failure or a
	// recovery takes mu, so that healthy calls share no lock and write no
	// shared memory.
	clean atomic.Bool

	mu       sync.Mutex // guards the fields below
	failures int
	off      bool
	retryAt  time.Time
	probing  bool
}

// allow reports whether a call may use Redis now. When it returns probe
// true, the caller is the one probe of a tier that was off and must report
// its outcome with ok or fail.
func (h *health) allow(now time.Time) (use, probe bool) {
	if h.clean.Load() {
		return true, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.off {
		return true, false
	}
	if h.probing || now.Before(h.retryAt) {
		return false, false
	}
	h.probing = true
	return true, true
}

func (h *health) ok(ctx context.Context) {
	if h.clean.Load() {
		return
	}
	h.mu.Lock()
	wasOff := h.off
	h.failures, h.off, h.probing = 0, false, false
	h.clean.Store(true)
	h.mu.Unlock()
	if wasOff && h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOff, Tier: idem.TierRedis})
	}
}

func (h *health) fail(ctx context.Context, err error, now time.Time) {
	h.mu.Lock()
	h.clean.Store(false)
	h.failures++
	h.probing = false
	switchOff := false
	if h.maxFailures > 0 && h.failures >= h.maxFailures {
		switchOff = !h.off
		h.off = true
		h.retryAt = now.Add(h.cooldown)
	}
	h.mu.Unlock()
	if switchOff && h.obs != nil {
		h.obs.Observe(ctx, idem.Event{Kind: idem.EventFallbackOn, Tier: idem.TierRedis, Err: err})
	}
}

// isOff reports whether Redis is currently switched off.
func (h *health) isOff() bool {
	if h.clean.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.off
}
