package redislayer

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/clock"
)

// Fill implements idem.Filler (fill.lua): it stores rec, which must be
// completed, for ttl (rounded up to whole milliseconds), replacing an
// in-progress record under rec.Key whatever its token, and wakes the key's
// waiters. An existing completed record is left as it is and Fill returns
// nil. rec.LeaseUntil, rec.ExpiresAt and rec.ExpiresIn are ignored: the
// record expires ttl from now (a caller that must not let the copy outlive
// the record it copies passes no more than rec.ExpiresIn).
//
// When rec.Token is an idem token it is remembered (never shown to
// readers), so that the owner holding it gets nil from a later Complete, as
// for a re-send; otherwise every Complete on the filled record gives
// idem.ErrLeaseLost.
func (l *Layer) Fill(ctx context.Context, rec idem.Record, ttl time.Duration) error {
	if rec.Key.IsZero() {
		return idem.ErrInvalidKey
	}
	if rec.State != idem.StateCompleted {
		return fmt.Errorf("redislayer: fill: record is %v, want completed", rec.State)
	}
	if len(rec.Fingerprint) > idem.MaxFingerprint {
		return fmt.Errorf("redislayer: fill: fingerprint of %d bytes, limit idem.MaxFingerprint (%d)", len(rec.Fingerprint), idem.MaxFingerprint)
	}
	if err := l.checkResult(rec.Result, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ms := millis(ttl)
	// The mark of a completed record is its retention (see value.go).
	v := encode(stateCompleted, rec.Token, ms, 0, clock.Now().UnixMilli()+ms, rec.Fingerprint, rec.Result)
	err := fillScript.Run(ctx, l.client, []string{l.name(rec.Key)}, v, ms).Err()
	if err != nil {
		return l.fail(ctx, "fill", err)
	}
	return nil
}
