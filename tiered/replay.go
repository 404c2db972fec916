package tiered

import (
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// replay returns a completed record's result, read from tier by a call sent
// at sent, and caches it for no longer than the record lives.
func (c *call) replay(rec idem.Record, tier idem.Tier, sent time.Time, waited bool) outcome {
	if c.s.cache != nil || waited {
		now := time.Now()
		c.s.cache.put(c.key, c.fp(), rec.Result, lives(rec, sent), now)
		if waited {
			c.observe(idem.EventWaited, tier, now.Sub(c.start), nil)
		}
	}
	c.observe(idem.EventReplay, tier, 0, nil)
	o := replayed(rec.Result, tier)
	o.result.Waited = waited
	return o
}

// lives returns until when, by this process's clock, rec is sure to live:
// the send time of the call that read it plus what it had left then. The
// zero time when the layer could not tell.
func lives(rec idem.Record, sent time.Time) time.Time {
	if rec.ExpiresIn <= 0 {
		return time.Time{}
	}
	return sent.Add(rec.ExpiresIn)
}

// replayed is the outcome of replaying a stored value: the value, or
// ErrNotReplayable for the marker of a result too large to keep.
func replayed(val []byte, tier idem.Tier) outcome {
	if isTooLargeMarker(val) {
		return outcome{result: Result{Replayed: true, Tier: tier}, err: fmt.Errorf("%w: %w", ErrNotReplayable, idem.ErrTooLarge)}
	}
	return outcome{result: Result{Value: val, Replayed: true, Tier: tier}}
}
