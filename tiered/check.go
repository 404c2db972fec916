package tiered

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Report is what Check found, for a readiness probe. It encodes as JSON
// that an endpoint can print as it is:
//
//	{"ready":true,"tiers":[
//	  {"tier":"redis","deciding":false,"error":"idem: store unavailable: redis: …","fallback":true,"latency":"2ms"},
//	  {"tier":"sql","deciding":true,"fallback":false,"latency":"1.5ms"}]}
type Report struct {
	// Ready is true when the Store can decide: its deciding tier (SQL, or
	// Redis in Redis-only mode) answered.
	Ready bool `json:"ready"`
	// Tiers has one entry per tier the Store was given, Redis first.
	Tiers []TierReport `json:"tiers"`
}

// TierReport is one tier's state.
type TierReport struct {
	// Tier is the tier.
	Tier idem.Tier
	// Deciding is true for the tier whose word is final.
	Deciding bool
	// Err is nil when the tier answered; else it wraps idem.ErrConfig (a
	// setup mistake: missing tables, refused credentials) or
	// idem.ErrUnavailable (an outage).
	Err error
	// Fallback is true for Redis while the Store skips it after repeated
	// failures (SQL decides alone meanwhile).
	Fallback bool
	// Latency is how long the check took.
	Latency time.Duration
}

// MarshalJSON encodes the tier's report with the tier by name, the error
// as its message ("error", left out when the tier answered) and the
// latency as a duration ("1.5ms"), as a readiness endpoint prints it.
func (t TierReport) MarshalJSON() ([]byte, error) {
	type tierJSON struct {
		Tier     idem.Tier `json:"tier"`
		Deciding bool      `json:"deciding"`
		Err      string    `json:"error,omitempty"`
		Fallback bool      `json:"fallback"`
		Latency  string    `json:"latency"`
	}
	out := tierJSON{Tier: t.Tier, Deciding: t.Deciding, Fallback: t.Fallback, Latency: t.Latency.String()}
	if t.Err != nil {
		out.Err = t.Err.Error()
	}
	return json.Marshal(out)
}

// Check asks every tier whether it can serve — one cheap round trip each,
// bounded by the tier's timeout — for readiness probes. A layer that does
// not implement idem.Checker is asked with a Get of a key that never
// exists. The error is nil when the Store can decide (Report.Ready); else
// it is the deciding tier's, wrapping idem.ErrConfig or
// idem.ErrUnavailable. Redis alone failing leaves the Store ready: SQL
// decides without it, only slower.
func (s *Store) Check(ctx context.Context) (Report, error) {
	if s.closed.Load() {
		return Report{}, idem.ErrClosed
	}
	var r Report
	var decidingErr error
	ask := func(tier idem.Tier, l idem.Layer, timeout time.Duration) {
		t := TierReport{Tier: tier, Deciding: l == s.deciding()}
		if tier == idem.TierRedis {
			t.Fallback = s.health.isOff()
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		began := time.Now()
		t.Err = check(cctx, l)
		t.Latency = time.Since(began)
		cancel()
		if t.Err != nil && !errors.Is(t.Err, idem.ErrConfig) && !errors.Is(t.Err, idem.ErrUnavailable) {
			t.Err = fmt.Errorf("%w: %s: %w", idem.ErrUnavailable, tier, t.Err)
		}
		if t.Deciding {
			decidingErr = t.Err
		}
		r.Tiers = append(r.Tiers, t)
	}
	if s.redis != nil {
		ask(idem.TierRedis, s.redis, s.cfg.redisTimeout)
	}
	if s.sql != nil {
		ask(idem.TierSQL, s.sql, s.cfg.sqlTimeout)
	}
	r.Ready = decidingErr == nil
	return r, decidingErr
}

// deciding returns the layer whose word is final.
func (s *Store) deciding() idem.Layer {
	if s.sql != nil {
		return s.sql
	}
	return s.redis
}

// checkKey is a key no call ever uses: the digest of an empty scope and a
// client key no middleware, Once or user of NewKey would write by accident.
var checkKey = idem.NewKey("\x00idem/check", "\x00")

// check asks l whether it can serve.
func check(ctx context.Context, l idem.Layer) error {
	if c, ok := l.(idem.Checker); ok {
		return c.Check(ctx)
	}
	_, err := l.Get(ctx, checkKey)
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	return err
}
