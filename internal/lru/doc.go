// Package lru is a bounded cache of values keyed by digests, with expiry:
// a least-recently-used cache in independently locked shards, each over
// its share of an item bound and a byte bound, so that hits on every core
// do not queue on one lock and the whole never holds more than the bounds.
//
// Keys are 32-byte digests ([Digest]), uniform already, so a key's shard
// and its slot in the shard's index are taken from its bytes without
// hashing. A shard's index is a small open-addressing table of its own and
// its entries one slice linked by index: once full, a put takes the place
// of the entry it evicts and allocates nothing.
//
// A value lives until the earlier of the cache's TTL and the end its caller
// gives it ([Cache.Put]'s until): a cache of a store's results must not
// outlive the records they come from.
package lru
