package tiered_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/tiered"
)

// BenchmarkDo measures the Store's own cost, on a memory layer (no network,
// the deciding tier's work a map under a lock), with a function that
// returns a 180-byte result at once:
//
//	path=first   a new key every iteration: claim, run, complete, cache
//	path=replay  one completed key, answered by the local cache
//
// Keys are made from a counter (idem.KeyFromDigest), so that making them
// costs nothing next to the Store.
func BenchmarkDo(b *testing.B) {
	result := make([]byte, 180)
	fn := func(context.Context) ([]byte, error) { return result, nil }
	var seq uint64 // across runs (-count): a key is never seen twice
	key := func() idem.Key {
		seq++
		var d [idem.KeySize]byte
		copy(d[8:], "tiered BenchmarkDo first keys")
		binary.BigEndian.PutUint64(d[:8], seq)
		return idem.KeyFromDigest(d)
	}
	for _, path := range []string{"first", "replay"} {
		b.Run("path="+path, func(b *testing.B) {
			s, err := tiered.New(tiered.WithSQL(newMem(b)))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			k := key()
			runtime.GC()
			b.ReportAllocs()
			for b.Loop() {
				if path == "first" {
					k = key()
				}
				if _, err := s.Do(ctx, k, "fp", fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
