package redislayer_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/storetest"
)

// fixedOrders are the Reserve orders the suite runs under one by one; the
// default, idem.OrderAdaptive, switches between them as the suite's mix of new keys
// and duplicates goes.
var fixedOrders = []idem.ReserveOrder{idem.OrderReadFirst, idem.OrderClaimFirst}

func TestConformanceMiniredis(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	t.Run("Layer", func(t *testing.T) { h, _ := miniHarness(t); storetest.Run(t, h) })
	for _, o := range fixedOrders {
		t.Run("Layer/"+o.String(), func(t *testing.T) {
			h, _ := miniHarness(t, redislayer.WithReserveOrder(o))
			storetest.Run(t, h)
		})
	}
	t.Run("Waiter", func(t *testing.T) { h, _ := miniHarness(t); storetest.RunWaiter(t, h) })
	t.Run("Filler", func(t *testing.T) { h, _ := miniHarness(t); storetest.RunFiller(t, h) })
}

func TestConformanceRedis(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	t.Run("Layer", func(t *testing.T) { storetest.Run(t, realHarness(t)) })
	for _, o := range fixedOrders {
		t.Run("Layer/"+o.String(), func(t *testing.T) {
			storetest.Run(t, realHarness(t, redislayer.WithReserveOrder(o)))
		})
	}
	t.Run("Waiter", func(t *testing.T) { storetest.RunWaiter(t, realHarness(t)) })
	t.Run("Filler", func(t *testing.T) { storetest.RunFiller(t, realHarness(t)) })
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	rc := testenv.StartRedisCluster(t)
	h := storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			return newLayer(t, rc.Client(t), redislayer.WithTimeout(5*time.Second))
		},
	}
	suites(t, h)
}

// TestConformanceRing runs the suite over a Ring of two test-owned servers:
// keys and channels spread over both shards, and Wait listens on each.
func TestConformanceRing(t *testing.T) {
	t.Parallel() // the timing-sensitive fault and wait tests run alone, before these
	a, b := testenv.StartRedisServer(t), testenv.StartRedisServer(t)
	h := storetest.Harness{
		New: func(t *testing.T) idem.Layer {
			c := redis.NewRing(&redis.RingOptions{
				Addrs:                 map[string]string{"a": a.Addr(), "b": b.Addr()},
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { _ = c.Close() })
			return newLayer(t, c, redislayer.WithTimeout(5*time.Second))
		},
		Keys: 100,
	}
	t.Run("Layer", func(t *testing.T) { storetest.Run(t, h) })
	t.Run("Waiter", func(t *testing.T) { storetest.RunWaiter(t, h) })
}

// suites runs the Layer, Waiter and Filler suites over h.
func suites(t *testing.T, h storetest.Harness) {
	t.Run("Layer", func(t *testing.T) { storetest.Run(t, h) })
	t.Run("Waiter", func(t *testing.T) { storetest.RunWaiter(t, h) })
	t.Run("Filler", func(t *testing.T) { storetest.RunFiller(t, h) })
}
