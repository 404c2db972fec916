package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// Breaker tracks whether a dependency is worth asking. After maxFailures
// failures in a row it is off for cooldown; then one call at a time probes
// it, and the first success switches it back on. It is safe for concurrent
// use.
type Breaker struct {
	maxFailures int
	cooldown    time.Duration

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

// New returns a Breaker, on, that switches off after maxFailures failures
// in a row for cooldown. maxFailures 0 never switches it off.
func New(maxFailures int, cooldown time.Duration) *Breaker {
	b := &Breaker{maxFailures: maxFailures, cooldown: cooldown}
	b.clean.Store(true)
	return b
}

// Allow reports whether a call may use the dependency now. When it returns
// probe true, the caller is the one probe of a dependency that was off and
// must report its outcome with Success or Failure.
func (b *Breaker) Allow(now time.Time) (use, probe bool) {
	if b.clean.Load() {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.off {
		return true, false
	}
	if b.probing || now.Before(b.retryAt) {
		return false, false
	}
	b.probing = true
	return true, true
}

// Success records a call that succeeded: the failures in a row start over,
// and a dependency that was off is on again. It reports whether this
// success switched it back on.
func (b *Breaker) Success() (switchedOn bool) {
	if b.clean.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	wasOff := b.off
	b.failures, b.off, b.probing = 0, false, false
	b.clean.Store(true)
	return wasOff
}

// Failure records a call that failed at now: one more failure in a row,
// which switches the dependency off (again, for a failed probe) until now
// plus the cool-down once they reach maxFailures. It reports whether this
// failure switched off a dependency that was on.
func (b *Breaker) Failure(now time.Time) (switchedOff bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clean.Store(false)
	b.failures++
	b.probing = false
	if b.maxFailures > 0 && b.failures >= b.maxFailures {
		switchedOff = !b.off
		b.off = true
		b.retryAt = now.Add(b.cooldown)
	}
	return switchedOff
}

// Off reports whether the dependency is switched off now.
func (b *Breaker) Off() bool {
	if b.clean.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.off
}
