package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

// waitGone waits until the deciding layer has forgotten k.
func waitGone(t *testing.T, l idem.Layer, k idem.Key) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := l.Get(t.Context(), k)
		if errors.Is(err, idem.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record never expired: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The local cache never serves a result past the record's expiry (DESIGN
// §9: a cache must not outlive its source). With a retention shorter than
// the cache's TTL, once the record expired and another instance ran the
// key again, every instance answers with the new result — the one that ran
// first, whose cache held the old result, and one that cached the old
// result as a replay. The deciding tier's clock runs 30 s ahead of the
// application's: nothing may compare the two.
func TestCacheNeverOutlivesRecord(t *testing.T) {
	const retention = 300 * time.Millisecond
	for _, skew := range []time.Duration{0, 30 * time.Second, -30 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			sql := newMem(t, memlayer.WithClock(func() time.Time { return time.Now().Add(skew) }))
			opts := []tiered.Option{tiered.WithSQL(sql), tiered.WithRetention(retention), tiered.WithLocalCache(100, 1<<20, time.Minute)}
			owner, reader, later := newStore(t, opts...), newStore(t, opts...), newStore(t, opts...)
			k := newKey(t)
			var c counter
			if r, err := owner.Do(t.Context(), k, "fp", c.fn("first")); err != nil || string(r.Value) != "first" {
				t.Fatalf("owner: %+v, %v", r, err)
			}
			if r, err := reader.Do(t.Context(), k, "fp", c.fn("never")); err != nil || string(r.Value) != "first" {
				t.Fatalf("reader: %+v, %v", r, err)
			}
			waitGone(t, sql, k)
			if r, err := later.Do(t.Context(), k, "fp", c.fn("second")); err != nil || string(r.Value) != "second" {
				t.Fatalf("after expiry: %+v, %v; want a new run", r, err)
			}
			for name, s := range map[string]*tiered.Store{"owner": owner, "reader": reader} {
				r, err := s.Do(t.Context(), k, "fp", c.fn("never"))
				if err != nil || string(r.Value) != "second" {
					t.Fatalf("%s: %+v, %v; want the record's current result", name, r, err)
				}
			}
			if c.runs.Load() != 2 {
				t.Fatalf("runs %d", c.runs.Load())
			}
		})
	}
}

// A replay is cached only for what the record has left to live, as the
// layer tells it; a layer that cannot tell gets nothing cached.
func TestCacheBoundByWhatTheLayerTells(t *testing.T) {
	sql := &noExpiresIn{newMem(t)}
	s := newStore(t, tiered.WithSQL(sql), tiered.WithLocalCache(100, 1<<20, time.Minute))
	other := newStore(t, tiered.WithSQL(sql))
	k := newKey(t)
	var c counter
	if _, err := other.Do(t.Context(), k, "fp", c.fn("paid")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := s.Do(t.Context(), k, "fp", c.fn("never"))
		if err != nil || string(r.Value) != "paid" || r.Tier != idem.TierSQL {
			t.Fatalf("replay: %+v, %v; want it from SQL every time", r, err)
		}
	}
}

// noExpiresIn hides how long records have left, as a layer that cannot tell
// would.
type noExpiresIn struct{ *memlayer.Layer }

func (l *noExpiresIn) Reserve(ctx context.Context, k idem.Key, fp string, lease, ttl time.Duration) (idem.Record, bool, error) {
	rec, ok, err := l.Layer.Reserve(ctx, k, fp, lease, ttl)
	rec.ExpiresIn = 0
	return rec, ok, err
}

func (l *noExpiresIn) Get(ctx context.Context, k idem.Key) (idem.Record, error) {
	rec, err := l.Layer.Get(ctx, k)
	rec.ExpiresIn = 0
	return rec, err
}
