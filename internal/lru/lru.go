package lru

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// KeySize is the size of a key: a digest such as SHA-256's.
const KeySize = 32

// Digest is a key of the cache. Its bytes must be uniform (a cryptographic
// digest): the cache takes its shard and its slots from them as they are.
type Digest = [KeySize]byte

// shardCount is how many independently locked shards a cache has (fewer
// when it holds fewer items). A hit takes its shard's lock (an index read
// and an LRU move), so with one lock, hits on every core queue behind each
// other; keys spread over the shards by their digest, which is uniform. A
// hot key, hit on every core, would still queue on its shard's lock: it is
// answered from the shard's hot copy without the lock (see shard.hot).
const shardCount = 16

// Cache is a bounded LRU of values with expiry, in shards that each keep
// their share of the item and byte bounds, so the whole never holds more
// than the bounds. It is safe for concurrent use. A nil *Cache holds
// nothing.
type Cache[V any] struct {
	ttl    time.Duration
	shards []shard[V]
}

// shard is an LRU over its share of the bounds. Its entries live in one
// slice and are linked by index, most recently used first: once the shard
// is full, a new entry takes the place of the one it evicts, so that a put
// allocates nothing, and while entries are evicted in the order they came
// (new keys, no hits) the evicted entry and its neighbours are next to the
// ones evicted before them in memory.
//
// Its index is a table of its own rather than a map: the keys are digests,
// uniform already, so a slot is found from the digest's bits without
// hashing, and a slot is eight bytes (a tag from the digest and the entry),
// so that the index of a full shard is a few kilobytes that stay in the
// processor's cache, where a map's was a few hundred for the whole cache,
// read at random by every new key's lookup, put and eviction.
type shard[V any] struct {
	maxItems, maxBytes int

	mu      sync.Mutex // guards the fields below
	slots   []slot     // the index: open addressing, linear probing, at most half full
	entries []entry[V] // up to maxItems; the unused ones are on the free list
	n       int        // entries in use
	head    int32      // most recently used entry, or none
	tail    int32      // least recently used entry, or none
	free    int32      // first unused entry, chained through next, or none
	bytes   int

	// headHits counts the hits on the head entry since it became the head;
	// guarded by mu.
	headHits int

	_ [64]byte // keep the lock off the cache line of hot

	// hot is a copy of the head entry, the most recently used, published
	// by the second hit that finds it at the head (the key is hot) and
	// withdrawn (nil) under mu before anything moves or removes the head.
	// A hit on it needs no lock and no LRU move (the head's is a no-op), so
	// that a key hit on every core reads one pointer that no hit writes.
	hot atomic.Pointer[hotEntry[V]]

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// hotEntry is the immutable copy of a shard's head entry that hits read
// without the lock.
type hotEntry[V any] struct {
	digest  Digest
	value   V
	expires time.Time
}

// none is the index of no entry.
const none = -1

// slot is a slot of a shard's index: the tag of the digest of entry idx,
// or tag 0 when the slot is empty.
type slot struct {
	tag uint32
	idx int32
}

// slotTag returns the tag of a digest: four of its bytes (not the first,
// which chooses the shard), never 0. Its low bits are its home slot.
func slotTag(d *Digest) uint32 { return binary.LittleEndian.Uint32(d[4:8]) | 1 }

type entry[V any] struct {
	digest     Digest
	value      V
	size       int // what value counts towards the byte bound
	expires    time.Time
	prev, next int32 // neighbours in the LRU order, or in the free list (next)
}

// New returns a cache of at most items values whose sizes add up to at most
// bytes, each kept for at most ttl. It returns nil, a cache that holds
// nothing, when items is not positive.
func New[V any](items, bytes int, ttl time.Duration) *Cache[V] {
	if items <= 0 {
		return nil
	}
	n := min(shardCount, items)
	c := &Cache[V]{ttl: ttl, shards: make([]shard[V], n)}
	for i := range c.shards {
		s := &c.shards[i]
		// Shares that add up to the bounds exactly.
		s.maxItems = items/n + btoi(i < items%n)
		s.maxBytes = bytes/n + btoi(i < bytes%n)
		size := 2
		for size < 2*s.maxItems {
			size *= 2
		}
		s.slots = make([]slot, size)
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

func (c *Cache[V]) shard(d *Digest) *shard[V] {
	return &c.shards[int(d[0])%len(c.shards)]
}

// Get copies the value cached for d, if any and unexpired at now, to
// *value, makes it the most recently used of its shard and reports whether
// it did; *value is left alone otherwise. d is only read. Both are
// pointers because a hit takes a few nanoseconds, and copying a 32-byte
// digest in and a value out (through the generic function's result) cost
// a tenth of that.
func (c *Cache[V]) Get(d *Digest, now time.Time, value *V) bool {
	if c == nil {
		return false
	}
	s := c.shard(d)
	if h := s.hot.Load(); h != nil && h.digest == *d && now.Before(h.expires) {
		*value = h.value // the head: moving it to the front changes nothing
		return true
	}
	s.mu.Lock()
	p, ok := s.find(d)
	if !ok {
		s.mu.Unlock()
		return false
	}
	i := s.slots[p].idx
	e := &s.entries[i]
	if !now.Before(e.expires) {
		s.remove(i)
		s.mu.Unlock()
		return false
	}
	if i == s.head {
		if s.headHits++; s.headHits == 2 {
			s.hot.Store(&hotEntry[V]{digest: e.digest, value: e.value, expires: e.expires})
		}
	} else {
		s.unlink(i)
		s.pushFront(i)
	}
	*value = e.value
	s.mu.Unlock()
	return true
}

// Put caches value for d, in place of any value d had, until min(now+ttl,
// until): until is when value stops being valid at the latest (its
// source's own expiry), and an until at or before now (the zero time
// included) caches nothing (and drops d's old value). size is what value counts towards the byte
// bound; a value larger than its shard's share of the bytes is not cached.
// Room is made by evicting the least recently used values of d's shard.
func (c *Cache[V]) Put(d *Digest, value V, size int, until, now time.Time) {
	if c == nil {
		return
	}
	s := c.shard(d)
	exp := now.Add(c.ttl)
	if until.Before(exp) {
		exp = until
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.find(d); ok {
		s.remove(s.slots[p].idx)
	}
	if size > s.maxBytes || !now.Before(exp) {
		return // and d's old value is gone: value took its place
	}
	var i int32
	switch {
	case s.n >= s.maxItems:
		i = s.tail // full: the least recently used makes room
		s.evict(i)
	case s.free != none:
		i = s.free
		s.free = s.entries[i].next
	default:
		s.entries = append(s.entries, entry[V]{})
		i = int32(len(s.entries) - 1)
	}
	s.entries[i] = entry[V]{digest: *d, value: value, size: size, expires: exp}
	s.index(i)
	s.pushFront(i)
	s.bytes += size
	for s.bytes > s.maxBytes {
		s.remove(s.tail)
	}
}

// Len returns the number of values cached, expired ones not yet dropped
// included.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// remove drops entry i and puts it on the free list. s.mu must be held.
func (s *shard[V]) remove(i int32) {
	s.evict(i)
	s.entries[i] = entry[V]{next: s.free} // let go of the value
	s.free = i
}

// evict takes entry i out of the LRU order and the index, for its place to
// be reused at once. s.mu must be held.
func (s *shard[V]) evict(i int32) {
	e := &s.entries[i]
	s.unlink(i)
	s.unindex(i)
	s.n--
	s.bytes -= e.size
}

// find returns the slot of the entry with digest d and true, or false when
// there is none. s.mu must be held.
func (s *shard[V]) find(d *Digest) (int, bool) {
	tag, mask := slotTag(d), len(s.slots)-1
	for p := int(tag) & mask; ; p = (p + 1) & mask { // a slot is always empty
		switch sl := s.slots[p]; {
		case sl.tag == 0:
			return 0, false
		case sl.tag == tag && s.entries[sl.idx].digest == *d:
			return p, true
		}
	}
}

// index puts entry i, which is not in the index, in it. s.mu must be held.
func (s *shard[V]) index(i int32) {
	tag, mask := slotTag(&s.entries[i].digest), len(s.slots)-1
	p := int(tag) & mask
	for s.slots[p].tag != 0 {
		p = (p + 1) & mask
	}
	s.slots[p] = slot{tag: tag, idx: i}
	s.n++
}

// unindex takes entry i out of the index and moves back the slots after
// it that would otherwise no longer be found (deletion from a linearly
// probed table without tombstones). s.mu must be held.
func (s *shard[V]) unindex(i int32) {
	tag, mask := slotTag(&s.entries[i].digest), len(s.slots)-1
	hole := int(tag) & mask
	for s.slots[hole].idx != i || s.slots[hole].tag != tag {
		hole = (hole + 1) & mask
	}
	for p := hole; ; {
		p = (p + 1) & mask
		sl := s.slots[p]
		if sl.tag == 0 {
			break
		}
		// sl stays unless its home slot is cyclically after the hole and
		// no later than p: a search from its home must not meet the hole.
		home := int(sl.tag) & mask
		if hole <= p && hole < home && home <= p || p < hole && (hole < home || home <= p) {
			continue
		}
		s.slots[hole] = sl
		hole = p
	}
	s.slots[hole] = slot{}
}

// pushFront makes entry i, which is in no list, the most recently used.
// s.mu must be held.
func (s *shard[V]) pushFront(i int32) {
	s.newHead()
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
func (s *shard[V]) unlink(i int32) {
	e := &s.entries[i]
	if e.prev != none {
		s.entries[e.prev].next = e.next
	} else {
		s.newHead()
		s.head = e.next
	}
	if e.next != none {
		s.entries[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
}

// newHead withdraws the hot copy of the head entry, which is about to move
// or go, and restarts the count of its hits. s.mu must be held.
func (s *shard[V]) newHead() {
	s.headHits = 0
	if s.hot.Load() != nil {
		s.hot.Store(nil)
	}
}
