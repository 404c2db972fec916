package tiered

import (
	"container/list"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// cache is a bounded LRU of completed results. It never holds in-progress
// records: only a decided result is safe to replay without asking a tier.
type cache struct {
	maxItems, maxBytes int
	ttl                time.Duration

	mu    sync.Mutex // guards items, order and bytes
	items map[[idem.KeySize]byte]*list.Element
	order *list.List // of *cacheEntry, most recently used first
	bytes int
}

type cacheEntry struct {
	digest      [idem.KeySize]byte
	fingerprint string
	value       []byte
	expires     time.Time
}

func newCache(items, bytes int, ttl time.Duration) *cache {
	if items <= 0 {
		return nil
	}
	return &cache{maxItems: items, maxBytes: bytes, ttl: ttl, items: make(map[[idem.KeySize]byte]*list.Element), order: list.New()}
}

// get returns the cached result for key, if any and unexpired.
func (c *cache) get(key idem.Key, now time.Time) (fingerprint string, value []byte, ok bool) {
	if c == nil {
		return "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.items[key.Digest()]
	if el == nil {
		return "", nil, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		return "", nil, false
	}
	c.order.MoveToFront(el)
	return e.fingerprint, e.value, true
}

// put stores a completed result until min(now+ttl, expiresAt). A value
// larger than the whole cache is not stored.
func (c *cache) put(key idem.Key, fingerprint string, value []byte, expiresAt, now time.Time) {
	if c == nil || len(value) > c.maxBytes {
		return
	}
	exp := now.Add(c.ttl)
	if !expiresAt.IsZero() && expiresAt.Before(exp) {
		exp = expiresAt
	}
	if !now.Before(exp) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := key.Digest()
	if el := c.items[d]; el != nil {
		c.remove(el)
	}
	c.items[d] = c.order.PushFront(&cacheEntry{digest: d, fingerprint: fingerprint, value: value, expires: exp})
	c.bytes += len(value)
	for len(c.items) > c.maxItems || c.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
}

// len returns the number of cached results.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// remove drops el. c.mu must be held.
func (c *cache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.items, e.digest)
	c.bytes -= len(e.value)
}
