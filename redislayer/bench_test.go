package redislayer_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

// benchResult is the size of the stored result and of the raw value it is
// compared with.
const benchResult = 1024

// benchParallelism are the concurrency levels measured, in goroutines per
// core (b.SetParallelism): 1, and 16 (32 goroutines on a 2-core machine).
var benchParallelism = []int{1, 16}

// benchEnv is one client over the real Redis, shared by the layer and the
// raw commands it is compared with, under a prefix deleted at the end.
type benchEnv struct {
	client *redis.Client
	layer  *redislayer.Layer
	prefix string
	value  []byte
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	o, err := testenv.RedisOptions()
	if err != nil {
		b.Skipf("real redis unavailable (%v): benchmarks compare against a real server", err)
	}
	o.ContextTimeoutEnabled = true
	o.PoolSize = 32 // every goroutine gets a connection, for both sides
	prefix := testenv.Prefix()
	cleanPrefix(b, o, prefix)
	c := redis.NewClient(o)
	b.Cleanup(func() { _ = c.Close() })
	e := &benchEnv{client: c, prefix: prefix, value: make([]byte, benchResult)}
	e.layer = newLayer(b, c, redislayer.WithPrefix(prefix))
	_, _ = rand.Read(e.value)
	return e
}

// run runs op b.N times over p goroutines per core, and reports the
// server's CPU time per operation (server-µs/op, from INFO cpu), so that
// what a script costs Redis shows beside what it costs the client.
func (e *benchEnv) run(b *testing.B, p int, op func(ctx context.Context, n uint64) error) {
	b.ReportAllocs()
	var seq atomic.Uint64
	ctx := b.Context()
	before := e.serverCPU(b)
	b.SetParallelism(p)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((e.serverCPU(b)-before).Microseconds())/float64(b.N), "server-µs/op")
}

// serverCPU returns the CPU time the Redis server has used, user and
// system. The server is the machine's shared one: run the benchmarks alone.
func (e *benchEnv) serverCPU(b *testing.B) time.Duration {
	info, err := e.client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", name, err)
			}
			total += time.Duration(f * float64(time.Second))
		}
	}
	return total
}

// BenchmarkDuplicate measures a duplicate of a completed key: Reserve (in
// the default order, which reads first once duplicates dominate: a GET that
// returns the record with its 1 KiB result) against a raw GET of a 1 KiB
// value, on the same client, and the same Reserve claim-first (SET NX PX
// GET). The target is a ratio of at least 0.8 in throughput.
func BenchmarkDuplicate(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	key := idem.NewKey("bench", e.prefix+"dup")
	rec, _, err := e.layer.Reserve(ctx, key, "fp", time.Minute, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.layer.Complete(ctx, key, rec.Token, e.value, time.Hour); err != nil {
		b.Fatal(err)
	}
	// The same duplicate through SET NX PX GET, which the adaptive order
	// leaves for workloads of mostly new keys, for comparison.
	claimFirst := newLayer(b, e.client, redislayer.WithPrefix(e.prefix), redislayer.WithReserveOrder(idem.OrderClaimFirst))
	raw := e.prefix + "raw"
	if err := e.client.Set(ctx, raw, e.value, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	for _, p := range benchParallelism {
		b.Run(fmt.Sprintf("p=%d/impl=GET", p), func(b *testing.B) {
			e.run(b, p, func(ctx context.Context, _ uint64) error {
				v, err := e.client.Get(ctx, raw).Bytes()
				if err == nil && len(v) != benchResult {
					err = fmt.Errorf("GET returned %d bytes", len(v))
				}
				return err
			})
		})
		for _, l := range []struct {
			impl  string
			layer *redislayer.Layer
		}{{"Reserve", e.layer}, {"ReserveClaimFirst", claimFirst}} {
			b.Run(fmt.Sprintf("p=%d/impl=%s", p, l.impl), func(b *testing.B) {
				e.run(b, p, func(ctx context.Context, _ uint64) error {
					rec, claimed, err := l.layer.Reserve(ctx, key, "fp", time.Minute, time.Hour)
					if err == nil && (claimed || len(rec.Result) != benchResult) {
						err = fmt.Errorf("duplicate: claimed=%v, %d bytes", claimed, len(rec.Result))
					}
					return err
				})
			})
		}
	}
}

// BenchmarkNewKey measures the whole life of a new key: Reserve (one
// script that claims it) then Complete with a 1 KiB result (a second), two
// round trips, against a raw SET NX PX of a 1 KiB value (one), on the same
// client. Keys expire after 3 s. The target is a ratio of at least 0.5 in
// throughput.
func BenchmarkNewKey(b *testing.B) {
	e := newBenchEnv(b)
	var run0 [idem.KeySize]byte
	_, _ = rand.Read(run0[:])
	const ttl = 3 * time.Second
	for _, p := range benchParallelism {
		b.Run(fmt.Sprintf("p=%d/impl=SETNX", p), func(b *testing.B) {
			e.run(b, p, func(ctx context.Context, n uint64) error {
				var buf [64]byte
				k := string(strconv.AppendUint(append(buf[:0], e.prefix...), n, 36))
				ok, err := e.client.SetNX(ctx, k, e.value, ttl).Result()
				if err == nil && !ok {
					err = fmt.Errorf("SET NX on a new key failed")
				}
				return err
			})
			cleanNow(b, e)
		})
		b.Run(fmt.Sprintf("p=%d/impl=ReserveComplete", p), func(b *testing.B) {
			e.run(b, p, func(ctx context.Context, n uint64) error {
				d := run0
				binary.BigEndian.PutUint64(d[:8], n)
				key := idem.KeyFromDigest(d)
				rec, claimed, err := e.layer.Reserve(ctx, key, "fp", ttl, ttl)
				if err != nil {
					return err
				}
				if !claimed {
					return fmt.Errorf("new key not claimed")
				}
				return e.layer.Complete(ctx, key, rec.Token, e.value, ttl)
			})
			_, _ = rand.Read(run0[:]) // the next run starts on fresh keys
			cleanNow(b, e)
		})
	}
}

// cleanNow deletes the keys a run wrote, so that runs do not pile up memory
// on a shared server.
func cleanNow(b *testing.B, e *benchEnv) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := e.client.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			e.client.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		e.client.Unlink(ctx, batch...)
	}
}
