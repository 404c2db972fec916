package redislayer_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
)

const (
	contendLayers     = 8 // instances, each on its own client
	contendGoroutines = 8 // per instance
)

// realLayers returns n layers on their own clients over the real Redis,
// sharing one fresh prefix. They alternate the two fixed Reserve orders, so
// that a GET-first duplicate races a claim-first one.
func realLayers(t *testing.T, n int) []*redislayer.Layer {
	t.Helper()
	r := testenv.RealRedis(t)
	prefix := testenv.Prefix()
	cleanPrefix(t, r.Options, prefix)
	ls := make([]*redislayer.Layer, n)
	for i := range ls {
		o := *r.Options
		o.ContextTimeoutEnabled = true
		c := redis.NewClient(&o)
		t.Cleanup(func() { _ = c.Close() })
		order := []idem.ReserveOrder{idem.OrderReadFirst, idem.OrderClaimFirst}[i%2]
		ls[i] = newLayer(t, c, redislayer.WithPrefix(prefix), redislayer.WithTimeout(5*time.Second),
			redislayer.WithReserveOrder(order))
	}
	return ls
}

// contend runs contendLayers × contendGoroutines goroutines, released at
// once, each reserving every key (from its own offset), and returns the
// claims per key.
func contend(t *testing.T, ls []*redislayer.Layer, keys []idem.Key) []int32 {
	t.Helper()
	claims := make([]atomic.Int32, len(keys))
	var (
		start  = make(chan struct{})
		wg     sync.WaitGroup
		failed atomic.Int32
	)
	for g := range len(ls) * contendGoroutines {
		wg.Go(func() {
			l := ls[g%len(ls)]
			<-start
			for j := range keys {
				i := (j + g*len(keys)/(len(ls)*contendGoroutines)) % len(keys)
				// A lease and retention no run outlives, however loaded the
				// machine: an expired key would rightly be claimed again.
				_, claimed, err := l.Reserve(t.Context(), keys[i], "fp", time.Hour, time.Hour)
				if err != nil {
					if failed.Add(1) < 5 {
						t.Errorf("Reserve: %v", err)
					}
					continue
				}
				if claimed {
					claims[i].Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	out := make([]int32, len(keys))
	for i := range claims {
		out[i] = claims[i].Load()
	}
	return out
}

func TestContentionOneKey(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	ls := realLayers(t, contendLayers)
	for i, n := range contend(t, ls, []idem.Key{idem.NewKey("contend", testenv.Name("one"))}) {
		if n != 1 {
			t.Fatalf("key %d: %d claims by %d×%d goroutines, want exactly 1", i, n, contendLayers, contendGoroutines)
		}
	}
}

func TestContentionThousandKeys(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	ls := realLayers(t, contendLayers)
	keys := make([]idem.Key, 1000)
	scope := testenv.Name("many")
	for i := range keys {
		keys[i] = idem.NewKey(scope, time.Duration(i).String())
	}
	bad := 0
	for i, n := range contend(t, ls, keys) {
		if n != 1 {
			if bad++; bad < 5 {
				t.Errorf("key %d: %d claims, want exactly 1", i, n)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys did not have exactly one claim", bad, len(keys))
	}
}
