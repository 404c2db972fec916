package tiered

import (
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

// cacheShard is an LRU over its share of the bounds. Its entries live in
// one slice and are linked by index, most recently used first: once the
// shard is full, a new entry takes the place of the one it evicts, so that
// a put allocates nothing, and while entries are evicted in the order they
// came (new keys, no replays) the evicted entry and its neighbours are next
// to the ones evicted before them in memory.
type cacheShard struct {
	maxItems, maxBytes int

	mu      sync.Mutex // guards the fields below
	index   map[[idem.KeySize]byte]int32
	entries []cacheEntry // up to maxItems; the unused ones are on the free list
	head    int32        // most recently used entry, or none
	tail    int32        // least recently used entry, or none
	free    int32        // first unused entry, chained through next, or none
	bytes   int

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// none is the index of no entry.
const none = -1

type cacheEntry struct {
	digest      [idem.KeySize]byte
	fingerprint string
	value       []byte
	expires     time.Time
	prev, next  int32 // neighbours in the LRU order, or in the free list (next)
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
		s.index = make(map[[idem.KeySize]byte]int32)
		s.head, s.tail, s.free = none, none, none
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
	i, ok := s.index[d]
	if !ok {
		return "", nil, false
	}
	e := &s.entries[i]
	if !now.Before(e.expires) {
		s.remove(i)
		return "", nil, false
	}
	s.unlink(i)
	s.pushFront(i)
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
	if i, ok := s.index[d]; ok {
		s.remove(i)
	}
	var i int32
	switch {
	case len(s.index) >= s.maxItems:
		i = s.tail // full: the least recently used makes room
		s.evict(i)
	case s.free != none:
		i = s.free
		s.free = s.entries[i].next
	default:
		s.entries = append(s.entries, cacheEntry{})
		i = int32(len(s.entries) - 1)
	}
	s.entries[i] = cacheEntry{digest: d, fingerprint: fingerprint, value: value, expires: exp}
	s.index[d] = i
	s.pushFront(i)
	s.bytes += len(value)
	for s.bytes > s.maxBytes {
		s.remove(s.tail)
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
		n += len(s.index)
		s.mu.Unlock()
	}
	return n
}

// remove drops entry i and puts it on the free list. s.mu must be held.
func (s *cacheShard) remove(i int32) {
	s.evict(i)
	s.entries[i] = cacheEntry{next: s.free} // let go of the value
	s.free = i
}

// evict takes entry i out of the LRU order and the index, for its place to
// be reused at once. s.mu must be held.
func (s *cacheShard) evict(i int32) {
	e := &s.entries[i]
	s.unlink(i)
	delete(s.index, e.digest)
	s.bytes -= len(e.value)
}

// pushFront makes entry i, which is in no list, the most recently used.
// s.mu must be held.
func (s *cacheShard) pushFront(i int32) {
	e := &s.entries[i]
	e.prev, e.next = none, s.head
	if s.head != none {
		s.entries[s.head].prev = i
	} else {
		s.tail = i
	}
	s.head = i
}

// unlink takes entry i out of the LRU order. s.mu must be held.
func (s *cacheShard) unlink(i int32) {
	e := &s.entries[i]
	if e.prev != none {
		s.entries[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next != none {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
}
