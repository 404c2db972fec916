package tiered_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/internal/testkit/stacktest"
	"github.com/idemkit/idem/internal/testkit/testenv"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// Check reports each tier for a readiness probe: ready while the deciding
// tier answers (Redis down only slows the Store), not ready with the
// deciding tier's error otherwise — a configuration error told apart from
// an outage.
func TestCheck(t *testing.T) {
	st := stacktest.Real(t)
	deadClient := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = deadClient.Close() })
	deadRedis := must.Get(redislayer.New(deadClient))(t)
	t.Cleanup(func() { _ = deadRedis.Close() })
	down := faultlayer.New(st.SQLLayer(t))
	down.Down()
	for _, tc := range []struct {
		name      string
		opts      []tiered.Option
		ready     bool
		redisErr  error
		sqlErr    error
		wantErrIs error
	}{
		{"healthy", []tiered.Option{tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(st.SQLLayer(t))}, true, nil, nil, nil},
		{"redis down", []tiered.Option{tiered.WithRedis(deadRedis), tiered.WithSQL(st.SQLLayer(t))}, true, idem.ErrUnavailable, nil, nil},
		{"tables missing", []tiered.Option{tiered.WithSQL(must.Get(sqllayer.New(st.DB(t), sqllayer.WithRecordsTable(testenv.Name("idem_never_created"))))(t))}, false, nil, idem.ErrConfig, idem.ErrConfig},
		{"sql down", []tiered.Option{tiered.WithRedis(st.RedisLayer(t)), tiered.WithSQL(down)}, false, nil, idem.ErrUnavailable, idem.ErrUnavailable},
		{"redis only, down", []tiered.Option{tiered.WithRedis(deadRedis)}, false, idem.ErrUnavailable, nil, idem.ErrUnavailable},
		{"a layer without Check", []tiered.Option{tiered.WithSQL(newMem(t))}, true, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.opts...)
			r, err := s.Check(t.Context())
			if r.Ready != tc.ready || (tc.wantErrIs == nil) != (err == nil) || (tc.wantErrIs != nil && !errors.Is(err, tc.wantErrIs)) {
				t.Fatalf("Check: %+v, %v; want ready %v, error %v", r, err, tc.ready, tc.wantErrIs)
			}
			for _, tier := range r.Tiers {
				want := tc.sqlErr
				if tier.Tier == idem.TierRedis {
					want = tc.redisErr
				}
				if (want == nil) != (tier.Err == nil) || (want != nil && !errors.Is(tier.Err, want)) {
					t.Fatalf("%s: %v, want %v", tier.Tier, tier.Err, want)
				}
			}
		})
	}
}

// A report reads as a readiness endpoint prints it: tiers by name, errors
// as their messages, latencies as durations — not "Tier":2 and "Err":{}.
func TestReportJSON(t *testing.T) {
	down := fmt.Errorf("%w: redis: dial tcp 127.0.0.1:6379: connection refused", idem.ErrUnavailable)
	r := tiered.Report{Ready: true, Tiers: []tiered.TierReport{
		{Tier: idem.TierRedis, Err: down, Fallback: true, Latency: 2 * time.Millisecond},
		{Tier: idem.TierSQL, Deciding: true, Latency: 1500 * time.Microsecond},
	}}
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ready":true,"tiers":[` +
		`{"tier":"redis","deciding":false,"error":"idem: store unavailable: redis: dial tcp 127.0.0.1:6379: connection refused","fallback":true,"latency":"2ms"},` +
		`{"tier":"sql","deciding":true,"fallback":false,"latency":"1.5ms"}]}`
	if string(got) != want {
		t.Fatalf("report as JSON:\n%s\nwant\n%s", got, want)
	}
	for tier := idem.TierNone; tier <= idem.TierSQL; tier++ {
		var back idem.Tier
		text, err := tier.MarshalText()
		if err != nil || back.UnmarshalText(text) != nil || back != tier {
			t.Errorf("tier %v: %q, %v; read back %v", tier, text, err, back)
		}
	}
	if _, err := idem.Tier(9).MarshalText(); err == nil {
		t.Error("MarshalText of a value that is no tier: no error")
	}
}
