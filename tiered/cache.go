package tiered

import (
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/lru"
)

// cache is the local cache of completed results (WithLocalCache): the
// fingerprint and value of a key, by its digest. It never holds in-progress
// records: only a decided result is safe to replay without asking a tier.
// A nil *cache, the local cache turned off, holds nothing.
type cache struct {
	results *lru.Cache[cached]
}

// cached is a completed result as the local cache keeps it.
type cached struct {
	fingerprint string
	value       []byte
}

// newCache returns a cache of at most items results whose values add up to
// at most bytes, each kept for at most ttl; nil when items is not positive.
func newCache(items, bytes int, ttl time.Duration) *cache {
	if items <= 0 {
		return nil
	}
	return &cache{results: lru.New[cached](items, bytes, ttl)}
}

// get returns the cached result for key, if any and unexpired.
func (c *cache) get(key idem.Key, now time.Time) (fingerprint string, value []byte, ok bool) {
	if c == nil {
		return "", nil, false
	}
	d := key.Digest()
	var r cached
	ok = c.results.Get(&d, now, &r)
	return r.fingerprint, r.value, ok
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
	c.results.Put(&d, cached{fingerprint, value}, len(value), lives, now)
}
