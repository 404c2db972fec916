package idemprom_test

import (
	"context"
	"errors"
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
	c := idemprom.New()
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
