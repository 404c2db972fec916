package lru

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"
)

// result is what the tests cache: a fingerprint and a value, as a store
// caches a completed result.
type result struct {
	fp    string
	value []byte
}

// cache is a cache of results, seen as a store uses it.
type cache struct{ *Cache[result] }

func newCache(items, bytes int, ttl time.Duration) cache {
	return cache{New[result](items, bytes, ttl)}
}

// put caches value with fingerprint fp for k, counting the value's length
// towards the byte bound.
func (c cache) put(k Digest, fp string, value []byte, until, now time.Time) {
	c.Put(&k, result{fp, value}, len(value), until, now)
}

// get returns the fingerprint and value cached for k.
func (c cache) get(k Digest, now time.Time) (string, []byte, bool) {
	var r result
	ok := c.Get(&k, now, &r)
	return r.fp, r.value, ok
}

func cacheKey(i int) Digest { return sha256.Sum256([]byte("cache/" + strconv.Itoa(i))) }

// forever is a value's life far beyond the cache's own TTL.
var forever = time.Now().Add(100 * 24 * time.Hour)

func TestCacheKeepsItsBounds(t *testing.T) {
	now := time.Now()
	for _, items := range []int{1, 3, 16, 100, 1000} {
		c := newCache(items, 1<<30, time.Minute)
		for i := range 20 * items {
			c.put(cacheKey(i), "fp", []byte("v"), forever, now)
		}
		// Each part fills up long before 20 × its share of keys arrive.
		if n := c.Len(); n != items {
			t.Errorf("items %d: %d cached after %d puts, want exactly the bound", items, n, 20*items)
		}
	}
	const bytes = 16 * 100
	c := newCache(1000, bytes, time.Minute)
	for i := range 1000 {
		c.put(cacheKey(i), "fp", make([]byte, 60), forever, now)
	}
	total := 0
	for i := range c.shards {
		total += c.shards[i].bytes
	}
	if total > bytes || total == 0 {
		t.Errorf("%d bytes cached, bound %d", total, bytes)
	}
	c.put(cacheKey(-1), "fp", make([]byte, bytes/16+1), forever, now)
	if _, _, ok := c.get(cacheKey(-1), now); ok {
		t.Error("a value over its part's share of bytes was cached")
	}
}

func TestCacheEvictsTheLeastRecentlyUsedOfAPart(t *testing.T) {
	now := time.Now()
	c := newCache(2*shardCount, 1<<20, time.Minute) // two entries a part
	// Three keys of one part.
	var same []Digest
	for i := 0; len(same) < 3; i++ {
		k, k0 := cacheKey(i), cacheKey(0)
		if c.shard(&k) == c.shard(&k0) {
			same = append(same, k)
		}
	}
	a, b, d := same[0], same[1], same[2]
	c.put(a, "fa", []byte("a"), forever, now)
	c.put(b, "fb", []byte("b"), forever, now)
	if _, _, ok := c.get(a, now); !ok { // a becomes the most recent
		t.Fatal("a missing")
	}
	c.put(d, "fd", []byte("d"), forever, now)
	if _, _, ok := c.get(b, now); ok {
		t.Error("b, the least recently used, was kept")
	}
	for _, k := range []Digest{a, d} {
		if _, _, ok := c.get(k, now); !ok {
			t.Errorf("%x evicted", k[:8])
		}
	}
}

func TestCacheExpires(t *testing.T) {
	now := time.Now()
	c := newCache(10, 1<<20, time.Minute)
	c.put(cacheKey(1), "fp", []byte("v"), forever, now)
	c.put(cacheKey(2), "fp", []byte("v"), now.Add(time.Second), now) // the record ends first
	if _, _, ok := c.get(cacheKey(2), now.Add(2*time.Second)); ok {
		t.Error("kept past the record's expiry")
	}
	if _, _, ok := c.get(cacheKey(1), now.Add(2*time.Second)); !ok {
		t.Error("dropped before the cache's TTL")
	}
	if _, _, ok := c.get(cacheKey(1), now.Add(time.Minute)); ok {
		t.Error("kept past the cache's TTL")
	}
	if n := c.Len(); n != 0 {
		t.Errorf("%d expired entries left after their reads", n)
	}
}

func TestCacheConcurrent(t *testing.T) {
	now := time.Now()
	c := newCache(64, 1<<20, time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := cacheKey((i*7 + g) % 200)
				name := hex.EncodeToString(k[:8])
				if fp, v, ok := c.get(k, now); ok && (fp != "fp"+name || string(v) != name) {
					t.Errorf("%s: got %q %q", name, fp, v)
					return
				}
				c.put(k, "fp"+name, []byte(name), forever, now)
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 64 {
		t.Errorf("%d cached, bound 64", n)
	}
}

// The cache agrees with a plain LRU of each part, whatever mix of puts,
// replaced keys, reads and expiries it sees: its entries are reused in
// place and its index is a table of its own, so this checks that no reuse,
// insertion or deletion loses or revives an entry. With few keys the same
// key is often hit twice in a row at the head of its part, so that hits
// are answered from the part's hot copy (shard.hot), which must never
// outlive a replacement, an eviction or an expiry either.
func TestCacheMatchesAPlainLRU(t *testing.T) {
	for _, tc := range []struct{ perPart, keys int }{{3, 200}, {40, 3000}, {2, 40}} {
		t.Run(strconv.Itoa(tc.perPart), func(t *testing.T) { testCacheMatchesAPlainLRU(t, tc.perPart, tc.keys) })
	}
}

func testCacheMatchesAPlainLRU(t *testing.T, perPart, keys int) {
	type item struct {
		d       Digest
		fp      string
		value   []byte
		expires time.Time
	}
	items, bytes := perPart*shardCount, perPart*shardCount*10
	c := newCache(items, bytes, time.Minute)
	model := make([][]item, len(c.shards)) // per part, most recent first
	part := func(d Digest) int { return int(d[0]) % len(c.shards) }
	drop := func(p, j int) { model[p] = append(model[p][:j], model[p][j+1:]...) }
	find := func(p int, d Digest) int {
		for j, it := range model[p] {
			if it.d == d {
				return j
			}
		}
		return -1
	}
	used := func(p int) (n int) {
		for _, it := range model[p] {
			n += len(it.value)
		}
		return n
	}
	now := time.Now()
	seed := uint64(1)
	rnd := func(n int) int { // a fixed sequence, the same on every run
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for op := range 20000 {
		k := cacheKey(rnd(keys))
		d := k
		p := part(d)
		switch rnd(4) {
		case 0, 1:
			fp := "fp" + strconv.Itoa(op)
			value := make([]byte, rnd(12))
			lives := now.Add(time.Duration(1+rnd(40)) * time.Second)
			c.put(k, fp, value, lives, now)
			if j := find(p, d); j >= 0 {
				drop(p, j)
			}
			model[p] = append([]item{{d, fp, value, lives}}, model[p]...)
			for len(model[p]) > c.shards[p].maxItems || used(p) > c.shards[p].maxBytes {
				drop(p, len(model[p])-1)
			}
		case 2:
			fp, v, ok := c.get(k, now)
			j := find(p, d)
			if j >= 0 && !now.Before(model[p][j].expires) {
				drop(p, j)
				j = -1
			}
			if ok != (j >= 0) {
				t.Fatalf("op %d: cached %v, the plain LRU says %v", op, ok, j >= 0)
			}
			if ok {
				it := model[p][j]
				if fp != it.fp || len(v) != len(it.value) {
					t.Fatalf("op %d: got %q, %d bytes; want %q, %d bytes", op, fp, len(v), it.fp, len(it.value))
				}
				drop(p, j)
				model[p] = append([]item{it}, model[p]...)
			}
		case 3:
			now = now.Add(time.Duration(rnd(3)) * time.Second)
		}
	}
	for p := range model {
		s := &c.shards[p]
		if s.n != len(model[p]) || s.bytes != used(p) {
			t.Fatalf("part %d: %d entries, %d bytes; the plain LRU has %d, %d", p, s.n, s.bytes, len(model[p]), used(p))
		}
		j := 0
		for i := s.head; i != none; i = s.entries[i].next {
			if s.entries[i].digest != model[p][j].d {
				t.Fatalf("part %d: entry %d out of order", p, j)
			}
			j++
		}
	}
}

// A cache of no items is nil and holds nothing; a value whose end is not
// after now (the zero time, when its source could not tell) is not cached.
func TestCacheHoldsNothingItCannotKeep(t *testing.T) {
	now := time.Now()
	off := New[result](0, 1<<20, time.Minute)
	if off != nil {
		t.Fatal("a cache of no items is not nil")
	}
	k := cacheKey(1)
	off.Put(&k, result{"fp", []byte("v")}, 1, forever, now)
	if off.Get(&k, now, new(result)) || off.Len() != 0 {
		t.Fatal("a nil cache holds a value")
	}
	c := newCache(10, 1<<20, time.Minute)
	for _, until := range []time.Time{{}, now.Add(-time.Second), now} {
		c.put(cacheKey(2), "fp", []byte("v"), until, now)
		if _, _, ok := c.get(cacheKey(2), now); ok {
			t.Fatalf("cached with an end of %v, at or before now", until)
		}
	}
}

// A hot key, hit without its shard's lock from the shard's copy of its
// head, is answered with its latest value: a Put that replaces it, its
// expiry and its eviction each withdraw the copy.
func TestCacheHotKeyFollowsItsEntry(t *testing.T) {
	now := time.Now()
	c := newCache(1, 1<<20, time.Minute) // one shard of one item
	hit := func(k Digest, want string) {
		t.Helper()
		for range 3 { // the second hit at the head publishes the copy, the third reads it
			fp, _, ok := c.get(k, now)
			if want == "" && ok {
				t.Fatalf("hit %q, want a miss", fp)
			}
			if want != "" && (!ok || fp != want) {
				t.Fatalf("got %q (%v), want %q", fp, ok, want)
			}
		}
	}
	k, other := cacheKey(1), cacheKey(2)
	c.put(k, "v1", nil, now.Add(time.Second), now)
	hit(k, "v1")
	if c.shards[0].hot.Load() == nil {
		t.Fatal("a key hit three times at the head has no hot copy")
	}
	c.put(k, "v2", nil, now.Add(time.Second), now) // replaced
	hit(k, "v2")
	now = now.Add(time.Second) // expired
	hit(k, "")
	c.put(k, "v3", nil, forever, now)
	hit(k, "v3")
	c.put(other, "o", nil, forever, now) // evicts k
	hit(k, "")
	hit(other, "o")
}

// Hits on one key from many goroutines, while another goroutine replaces
// its value, always see a value that was put.
func TestCacheHotKeyConcurrent(t *testing.T) {
	now := time.Now()
	c := newCache(4, 1<<20, time.Minute)
	k := cacheKey(7)
	c.put(k, "v0", nil, forever, now)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if fp, _, ok := c.get(k, now); !ok || fp[0] != 'v' {
					t.Errorf("got %q (%v)", fp, ok)
					return
				}
			}
		})
	}
	for i := range 2000 {
		c.put(k, "v"+strconv.Itoa(i), nil, forever, now)
	}
	close(stop)
	wg.Wait()
}
