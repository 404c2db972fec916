package bench

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem/tiered"
)

// pairedBlock is how many new keys each implementation runs in a row in
// BenchmarkTiersPaired before the next takes its turn.
const pairedBlock = 16

// BenchmarkTiersPaired measures what the Redis tier costs a first execution
// at one goroutine on a machine whose load moves faster than a benchmark
// runs: BenchmarkStore's op=new-tiers implementations (baseline, the
// SQL-only Store; idem, the Store with Redis + SQL; floor, the SQL-only Do
// beside the Redis round trips of a new key by hand) take turns in blocks
// of pairedBlock fresh keys, so that each block meets the load its
// neighbours met. Each Do is timed on its own; it reports the ratios of
// the implementations' summed times (idem/baseline, floor/baseline,
// idem/floor), which benchstat summarizes across runs; ns/op is the time of
// one key of each.
//
// Within a block each Do of the Store with Redis overlaps the completion
// its predecessor sends to Redis off the caller's time, as consecutive
// requests of one client do; between blocks the benchmark pauses (untimed)
// until that last completion has surely landed, so that it weighs on no
// other implementation's time.
func BenchmarkTiersPaired(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	tiers := st.store(b, tiered.WithLocalCache(0, 0, 0))
	sqlOnly := st.sqlOnly(b, tiered.WithLocalCache(0, 0, 0))
	token := []byte("paired-floor-token")
	impls := [3]func() error{
		func() error { _, err := sqlOnly.Do(ctx, freshKey(), fp, work); return err },
		func() error { _, err := tiers.Do(ctx, freshKey(), fp, work); return err },
		func() error {
			k := freshKey()
			done := make(chan error, 1)
			go func() { done <- st.redisNewKey(ctx, k, token) }()
			_, err := sqlOnly.Do(ctx, k, fp, work)
			if rerr := <-done; err == nil {
				err = rerr
			}
			return err
		},
	}
	// Warm each path (plans, the Store's guess that new keys need SQL).
	for _, f := range impls {
		for range pairedBlock {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
	}
	var spent [3]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += pairedBlock {
		for i, f := range impls {
			for range min(pairedBlock, b.N-n) {
				start := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				spent[i] += time.Since(start)
			}
			b.StopTimer()
			time.Sleep(2 * time.Millisecond) // the last background completion lands
			b.StartTimer()
		}
	}
	b.StopTimer()
	if spent[0] > 0 && spent[2] > 0 {
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "idem/baseline")
		b.ReportMetric(float64(spent[2])/float64(spent[0]), "floor/baseline")
		b.ReportMetric(float64(spent[1])/float64(spent[2]), "idem/floor")
	}
}
