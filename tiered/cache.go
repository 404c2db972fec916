package tiered

import (
	"container/list"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// cacheShards is how many independently locked parts the local cache has
// (fewer when it holds fewer items). A hot replay takes the cache's lock
// twice (a map read and an LRU move), so with one lock, replays on every
// core queue behind each other; keys spread over the parts by their digest,
// which is uniform.
const cacheShards = 16

// cache is a bounded LRU of completed results, in shards that each keep
// their share of the item and byte bounds, so the whole never holds more
// than the bounds. It never holds in-progress records: only a decided
// result is safe to replay without asking a tier.
type cache struct {
	ttl    time.Duration
	shards []cacheShard
}

// cacheShard is an LRU over its share of the bounds.
type cacheShard struct {
	maxItems, maxBytes int

	mu    sync.Mutex // guards items, order and bytes
	items map[[idem.KeySize]byte]*list.Element
	order *list.List // of *cacheEntry, most recently used first
	bytes int

	_ [64]byte // keep neighbouring shards' locks off one cache line
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
	n := min(cacheShards, items)
	c := &cache{ttl: ttl, shards: make([]cacheShard, n)}
	for i := range c.shards {
		s := &c.shards[i]
		// Shares that add up to the bounds exactly.
		s.maxItems = items/n + btoi(i < items%n)
		s.maxBytes = bytes/n + btoi(i < bytes%n)
		s.items = make(map[[idem.KeySize]byte]*list.Element)
		s.order = list.New()
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *cache) shard(d *[idem.KeySize]byte) *cacheShard {
	return &c.shards[int(d[0])%len(c.shards)]
}

// get returns the cached result for key, if any and unexpired.
func (c *cache) get(key idem.Key, now time.Time) (fingerprint string, value []byte, ok bool) {
	if c == nil {
		return "", nil, false
	}
	d := key.Digest()
	s := c.shard(&d)
	s.mu.Lock()
	defer s.mu.Unlock()
	el := s.items[d]
	if el == nil {
		return "", nil, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		s.remove(el)
		return "", nil, false
	}
	s.order.MoveToFront(el)
	return e.fingerprint, e.value, true
}

// put stores a completed result until min(now+ttl, lives), where lives is
// until when the record surely lives by this process's clock (see
// idem.Record.ExpiresIn). A cache must not outlive its source: with lives
// unknown (zero) nothing is stored. A value larger than its shard's share of
// the bytes is not stored.
func (c *cache) put(key idem.Key, fingerprint string, value []byte, lives, now time.Time) {
	if c == nil || lives.IsZero() {
		return
	}
	d := key.Digest()
	s := c.shard(&d)
	if len(value) > s.maxBytes {
		return
	}
	exp := now.Add(c.ttl)
	if lives.Before(exp) {
		exp = lives
	}
	if !now.Before(exp) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el := s.items[d]; el != nil {
		s.remove(el)
	}
	s.items[d] = s.order.PushFront(&cacheEntry{digest: d, fingerprint: fingerprint, value: value, expires: exp})
	s.bytes += len(value)
	for len(s.items) > s.maxItems || s.bytes > s.maxBytes {
		s.remove(s.order.Back())
	}
}

// len returns the number of cached results.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.items)
		s.mu.Unlock()
	}
	return n
}

// remove drops el. s.mu must be held.
func (s *cacheShard) remove(el *list.Element) {
	e := s.order.Remove(el).(*cacheEntry)
	delete(s.items, e.digest)
	s.bytes -= len(e.value)
}
