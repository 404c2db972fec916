package redislayer

import (
	"encoding/hex"

	"github.com/idemkit/idem"
)

// Suffixes of the key family of one idempotency key. The record is
// prefix{hex}; the scripts derive the channel from it the same way.
const (
	leaseSuffix = ":lease"
	doneSuffix  = ":done"
)

// names are the Redis names of one idempotency key: the record hash and the
// lease key. Both carry the key digest as a hash tag, so they share a Cluster
// slot (and a Ring shard) and one script may touch both.
type names struct {
	record, lease string
}

// names builds both names with a single allocation: the record name is a
// prefix of the lease name.
func (l *Layer) names(key idem.Key) names {
	d := key.Digest()
	n := len(l.prefix) + 2 + 2*idem.KeySize + len(leaseSuffix)
	b := make([]byte, 0, n)
	b = append(b, l.prefix...)
	b = append(b, '{')
	b = hex.AppendEncode(b, d[:])
	b = append(b, '}')
	b = append(b, leaseSuffix...)
	s := string(b)
	return names{record: s[:len(s)-len(leaseSuffix)], lease: s}
}

// keys returns the names as the KEYS list of a script.
func (n names) keys() []string { return []string{n.record, n.lease} }

// channel returns the completion channel of the record named record.
func channel(record string) string { return record + doneSuffix }
