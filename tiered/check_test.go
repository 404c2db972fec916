package tiered_test

import (
	"errors"
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
