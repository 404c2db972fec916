package mix

import "sync/atomic"

// Existing estimates the share of keys that existed among the last Reserve
// calls: an exponentially weighted average in units of 1/one, updated with
// plain loads and stores (a lost update among racing calls is harmless: it
// only delays a switch of order). The zero value expects new keys.
type Existing struct{ v atomic.Int64 }

const (
	one   = 1 << 16
	shift = 5 // each call weighs 1/32: a switch takes a couple of dozen calls
)

// Learn records one Reserve that found its key there (existed) or not.
func (e *Existing) Learn(existed bool) {
	x := int64(0)
	if existed {
		x = one
	}
	v := e.v.Load()
	if n := v + (x-v)>>shift; n != v {
		// A steady workload settles the estimate: no store then, so that
		// the cache line is not passed between cores on every call.
		e.v.Store(n)
	}
}

// Mostly reports whether at least half the recent keys existed.
func (e *Existing) Mostly() bool { return e.v.Load() >= one/2 }
