package bench

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/lru"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// BenchmarkMemory measures how the in-memory paths scale with goroutines
// on the machine's cores: each op at 1 goroutine (a plain loop) and at 16
// (RunParallel), so that the ratio of the two is the scaling, and next to
// a floor written by hand, so that the ratio to it is the price.
//
//	op=replay      idem:  memlayer Reserve of a completed key (the record and its
//	                      result copied out), each goroutine on keys of its own
//	               floor: a sync.Map load of the same key's result, copied out:
//	                      the least a replay from memory costs
//	op=store-replay idem: tiered.Store.Do of a completed key over memlayer with
//	                      the local cache off, each goroutine on keys of its own
//	               floor: the floor of op=replay
//	op=hot-key     idem:  tiered.Store.Do of one completed key, answered by the
//	                      local cache, from every goroutine
//	               floor: an atomic pointer load of the key's cached value: the
//	                      least a read of one shared value costs
//	op=lru-hot     idem:  the local cache itself (internal/lru) hit on one key
//	               floor: the floor of op=hot-key
//	op=scaling     each path (and the two floors) in alternating turns at 1
//	               and 16 goroutines: t16/t1, an op's time at 16 over its
//	               time at 1 (see scaling)
//
// No op writes a shared counter of its own: each goroutine picks its keys
// from its own cursor, so that the benchmark adds no contention.
func BenchmarkMemory(b *testing.B) {
	ctx := context.Background()
	mem, err := memlayer.New()
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]idem.Key, 4096)
	var floor sync.Map
	for i := range keys {
		keys[i] = completedKey(b, mem)
		floor.Store(keys[i].Digest(), result)
	}
	cold, err := tiered.New(tiered.WithSQL(mem), tiered.WithLocalCache(0, 0, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer cold.Close()
	warm, err := tiered.New(tiered.WithSQL(mem))
	if err != nil {
		b.Fatal(err)
	}
	defer warm.Close()
	hot := keys[0]
	for range 3 { // cached, then hit twice: a hot key
		if _, err := warm.Do(ctx, hot, fp, work); err != nil {
			b.Fatal(err)
		}
	}
	cache := lru.New[[]byte](1024, 1<<20, time.Hour)
	hd := hot.Digest()
	cache.Put(&hd, result, len(result), time.Now().Add(time.Hour), time.Now())
	var hotValue atomic.Pointer[[]byte]
	hotValue.Store(&result)

	var seq atomic.Int64 // where each goroutine's cursor starts
	perKey := func(f func(k idem.Key)) func() func() {
		return func() func() {
			i := int(seq.Add(997))
			return func() {
				i++
				f(keys[i%len(keys)])
			}
		}
	}
	replay := perKey(func(k idem.Key) {
		if rec, _, err := mem.Reserve(ctx, k, fp, lease, retention); err != nil || !rec.Completed() {
			b.Error(rec.State, err)
		}
	})
	floorReplay := perKey(func(k idem.Key) {
		v, ok := floor.Load(k.Digest())
		if !ok {
			b.Error("floor: no value")
			return
		}
		if cp := append(make([]byte, 0, len(v.([]byte))), v.([]byte)...); len(cp) != len(result) {
			b.Error("floor: a short copy")
		}
	})
	storeReplay := perKey(func(k idem.Key) {
		if _, err := cold.Do(ctx, k, fp, work); err != nil {
			b.Error(err)
		}
	})
	same := func(f func()) func() func() { return func() func() { return f } }
	hotKey := same(func() {
		if _, err := warm.Do(ctx, hot, fp, work); err != nil {
			b.Error(err)
		}
	})
	lruHot := same(func() {
		var v []byte
		if !cache.Get(&hd, time.Now(), &v) {
			b.Error("lru: a miss on the hot key")
		}
	})
	floorHot := same(func() {
		if v := hotValue.Load(); v == nil {
			b.Error("floor: no value")
		}
		_ = time.Now() // as the cache reads the clock for the expiry
	})
	b.Run("op=scaling", func(b *testing.B) {
		for _, c := range []struct {
			op   string
			body func() func()
		}{
			{"replay", replay}, {"store-replay", storeReplay}, {"hot-key", hotKey}, {"lru-hot", lruHot},
			{"floor-replay", floorReplay}, {"floor-hot", floorHot},
		} {
			b.Run("path="+c.op, func(b *testing.B) { scaling(b, c.body) })
		}
	})
	for _, n := range goroutines {
		for _, c := range []struct {
			op, impl string
			body     func() func()
		}{
			{"replay", "idem", replay},
			{"replay", "floor", floorReplay},
			{"store-replay", "idem", storeReplay},
			{"store-replay", "floor", floorReplay},
			{"hot-key", "idem", hotKey},
			{"hot-key", "floor", floorHot},
			{"lru-hot", "idem", lruHot},
			{"lru-hot", "floor", floorHot},
		} {
			b.Run(name(c.op, n, c.impl), func(b *testing.B) { perGoroutine(b, n, c.body) })
		}
	}
}

// scalingTurn is how many ops each turn of scaling runs.
const scalingTurn = 16000

// scaling runs the body in turns, one of scalingTurn ops on one goroutine,
// then one of as many ops shared by 16 goroutines, for b.N turns each, and
// reports t16/t1: the time an op took at 16 goroutines over its time at
// one, summed over the turns. Turns of a few milliseconds put a change of
// the machine's load on both alike, as separate benchmarks a second apart
// do not. Below 1 the path scales: 0.5 is twice the throughput at 16.
func scaling(b *testing.B, newBody func() func()) {
	b.ReportAllocs()
	one := newBody()
	bodies := make([]func(), 16)
	for i := range bodies {
		bodies[i] = newBody()
	}
	var t1, t16 time.Duration
	for b.Loop() {
		start := time.Now()
		for range scalingTurn {
			one()
		}
		t1 += time.Since(start)
		start = time.Now()
		var wg sync.WaitGroup
		for _, body := range bodies {
			wg.Go(func() {
				for range scalingTurn / len(bodies) {
					body()
				}
			})
		}
		wg.Wait()
		t16 += time.Since(start)
	}
	b.ReportMetric(float64(t16)/float64(t1), "t16/t1")
}

// perGoroutine runs n goroutines in total (a plain loop for 1), each
// calling the body that newBody made for it.
func perGoroutine(b *testing.B, n int, newBody func() func()) {
	b.ReportAllocs()
	if n <= 1 {
		body := newBody()
		for b.Loop() {
			body()
		}
		return
	}
	b.SetParallelism(max(1, n/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		body := newBody()
		for pb.Next() {
			body()
		}
	})
}
