package tiered

import (
	"encoding/binary"
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
//
// Its index is a table of its own rather than a map: the keys are digests,
// uniform already, so a slot is found from the digest's bits without
// hashing, and a slot is eight bytes (a tag from the digest and the entry),
// so that the index of a full shard is a few kilobytes that stay in the
// processor's cache, where a map's was a few hundred for the whole cache,
// read at random by every first execution's lookup, put and eviction.
type cacheShard struct {
	maxItems, maxBytes int

	mu      sync.Mutex   // guards the fields below
	slots   []cacheSlot  // the index: open addressing, linear probing, at most half full
	entries []cacheEntry // up to maxItems; the unused ones are on the free list
	n       int          // entries in use
	head    int32        // most recently used entry, or none
	tail    int32        // least recently used entry, or none
	free    int32        // first unused entry, chained through next, or none
	bytes   int

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// none is the index of no entry.
const none = -1

// cacheSlot is a slot of a shard's index: the tag of the digest of entry
// idx, or tag 0 when the slot is empty.
type cacheSlot struct {
	tag uint32
	idx int32
}

// slotTag returns the tag of a digest: four of its bytes (not the first,
// which chooses the shard), never 0. Its low bits are its home slot.
func slotTag(d *[idem.KeySize]byte) uint32 { return binary.LittleEndian.Uint32(d[4:8]) | 1 }

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
		size := 2
		for size < 2*s.maxItems {
			size *= 2
		}
		s.slots = make([]cacheSlot, size)
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
	p, ok := s.find(&d)
	if !ok {
		return "", nil, false
	}
	i := s.slots[p].idx
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
	if p, ok := s.find(&d); ok {
		s.remove(s.slots[p].idx)
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
		s.entries = append(s.entries, cacheEntry{})
		i = int32(len(s.entries) - 1)
	}
	s.entries[i] = cacheEntry{digest: d, fingerprint: fingerprint, value: value, expires: exp}
	s.index(i)
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
		n += s.n
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
	s.unindex(i)
	s.n--
	s.bytes -= len(e.value)
}

// find returns the slot of the entry with digest d and true, or false when
// there is none. s.mu must be held.
func (s *cacheShard) find(d *[idem.KeySize]byte) (int, bool) {
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
func (s *cacheShard) index(i int32) {
	tag, mask := slotTag(&s.entries[i].digest), len(s.slots)-1
	p := int(tag) & mask
	for s.slots[p].tag != 0 {
		p = (p + 1) & mask
	}
	s.slots[p] = cacheSlot{tag: tag, idx: i}
	s.n++
}

// unindex takes entry i out of the index and moves back the slots after
// it that would otherwise no longer be found (deletion from a linearly
// probed table without tombstones). s.mu must be held.
func (s *cacheShard) unindex(i int32) {
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
	s.slots[hole] = cacheSlot{}
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
