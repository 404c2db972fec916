package tiered

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func cacheKey(i int) idem.Key { return idem.NewKey("cache", strconv.Itoa(i)) }

// forever is a record's life far beyond the cache's own TTL.
var forever = time.Now().Add(100 * 24 * time.Hour)

func TestCacheKeepsItsBounds(t *testing.T) {
	now := time.Now()
	for _, items := range []int{1, 3, 16, 100, 1000} {
		c := newCache(items, 1<<30, time.Minute)
		for i := range 20 * items {
			c.put(cacheKey(i), "fp", []byte("v"), forever, now)
		}
		// Each part fills up long before 20 × its share of keys arrive.
		if n := c.len(); n != items {
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
	c := newCache(2*cacheShards, 1<<20, time.Minute) // two entries a part
	// Three keys of one part.
	var same []idem.Key
	for i := 0; len(same) < 3; i++ {
		k := cacheKey(i)
		if d, d0 := k.Digest(), cacheKey(0).Digest(); c.shard(&d) == c.shard(&d0) {
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
	for _, k := range []idem.Key{a, d} {
		if _, _, ok := c.get(k, now); !ok {
			t.Errorf("%v evicted", k)
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
	if n := c.len(); n != 0 {
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
				if fp, v, ok := c.get(k, now); ok && (fp != "fp"+k.String() || string(v) != k.String()) {
					t.Errorf("%v: got %q %q", k, fp, v)
					return
				}
				c.put(k, "fp"+k.String(), []byte(k.String()), forever, now)
			}
		})
	}
	wg.Wait()
	if n := c.len(); n > 64 {
		t.Errorf("%d cached, bound 64", n)
	}
}
