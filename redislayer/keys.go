package redislayer

import (
	"encoding/hex"

	"github.com/idemkit/idem"
)

// doneSuffix turns a record's name into its completion channel's; the
// scripts derive the channel the same way (KEYS[1] .. ':done').
const doneSuffix = ":done"

// name returns the Redis key of key's record: prefix{<digest hex>}. The hash
// tag puts the record, and its channel, in one Cluster slot and Ring shard.
func (l *Layer) name(key idem.Key) string {
	d := key.Digest()
	var buf [128]byte // on the stack for prefixes up to 62 bytes
	b := append(buf[:0], l.prefix...)
	b = append(b, '{')
	b = hex.AppendEncode(b, d[:])
	b = append(b, '}')
	return string(b)
}

// channel returns the completion channel of the record named record.
func channel(record string) string { return record + doneSuffix }
