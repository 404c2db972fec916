package idemprom

import "sync/atomic"

// seriesCache holds the series of a metric vector by two small indexes (an
// outcome or event kind, and a tier), so that the hot path neither hashes
// label values nor allocates once a series exists. Indexes out of range
// fall through to get, uncached.
type seriesCache[T any] struct {
	slots [cacheKinds * cacheTiers]atomic.Pointer[T]
}

const cacheKinds, cacheTiers = 32, 4

func (c *seriesCache[T]) load(kind, tier int, get func() T) T {
	if kind < 0 || kind >= cacheKinds || tier < 0 || tier >= cacheTiers {
		return get()
	}
	slot := &c.slots[kind*cacheTiers+tier]
	if v := slot.Load(); v != nil {
		return *v
	}
	v := get()
	slot.Store(&v)
	return v
}
