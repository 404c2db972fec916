package idemprom_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollectorCountsStoreEvents(t *testing.T) {
	c := must.Get(idemprom.New())(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	s, err := tiered.New(tiered.WithSQL(must.Get(memlayer.New())(t)), tiered.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := idem.NewKey("t", "k")
	fn := func(context.Context) ([]byte, error) { return []byte("ok"), nil }
	for range 3 {
		if _, err := s.Do(t.Context(), k, "fp", fn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Do(t.Context(), k, "other", fn); !errors.Is(err, idem.ErrMismatch) {
		t.Fatal(err)
	}
	want := `
# HELP idem_events_total idem events by kind and tier (new, replay, waited, in_flight, mismatch, lease_lost, tier_error, fallback_on, fallback_off, released, takeover).
# TYPE idem_events_total counter
idem_events_total{event="mismatch",tier="local"} 1
idem_events_total{event="new",tier="sql"} 1
idem_events_total{event="replay",tier="local"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idem_events_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "idem_work_duration_seconds"); n != 1 {
		t.Fatalf("work histogram series: %d, want 1", n)
	}
}

// Options given nonsense are one error from New that names each of them,
// where the prometheus client would panic at New or at registration.
func TestNewRefusesNonsense(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []idemprom.Option
	}{
		{"buckets out of order", []idemprom.Option{idemprom.WithBuckets(1, 0.5)}},
		{"no buckets", []idemprom.Option{idemprom.WithBuckets()}},
		{"NaN bucket", []idemprom.Option{idemprom.WithBuckets(math.NaN())}},
		{"bad namespace", []idemprom.Option{idemprom.WithNamespace("9 lives")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := idemprom.New(tc.opts...); !errors.Is(err, idem.ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
	_, err := idemprom.New(idemprom.WithBuckets(), idemprom.WithNamespace("-"))
	for _, name := range []string{"WithBuckets", "WithNamespace"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

// An empty namespace is no namespace: the metrics register without a prefix.
func TestEmptyNamespace(t *testing.T) {
	c := must.Get(idemprom.New(idemprom.WithNamespace("")))(t)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	c.Observe(t.Context(), idem.Event{Kind: idem.EventNew, Tier: idem.TierSQL})
	if n, err := testutil.GatherAndCount(reg, "events_total"); err != nil || n != 1 {
		t.Fatalf("events_total: %d series, %v", n, err)
	}
}
