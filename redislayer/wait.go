package redislayer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// leaseSlack is added to a lease's remaining time before Wait reads the
// record again to see whether the owner renewed it.
const leaseSlack = 5 * time.Millisecond

// errWaitClosed is what Wait returns once the layer is closed.
var errWaitClosed = fmt.Errorf("%w: redislayer: wait: %w", idem.ErrUnavailable, idem.ErrClosed)

// Wait implements idem.Waiter without polling. It subscribes to the key's
// completion channel (on the layer's shared subscription) and reads the
// record at once, and again once Redis has confirmed the subscription, so a
// completion between a read and the subscription cannot be missed. A
// waiter's read flags an in-progress record as waited, which makes its
// Complete or Release publish. Then Wait blocks until Complete, Release or
// Fill publishes on the channel (from any instance), reads the record again
// and returns:
//
//   - the completed record (Token ""), or
//   - idem.ErrNotFound when the record is gone (released or expired), or
//     when its owner's lease lapsed without renewal: the owner is presumed
//     dead, and the caller's next Reserve grants it a grace (and Wait
//     waits again, until the owner's late completion or the grace's end)
//     or, once the grace lapsed too, takes the key over.
//
// A record taken over by a new owner is still in progress: Wait goes on.
// The completed record carries ExpiresIn from its PTTL. A
// waiter costs a constant number of commands, not one per unit of time: two
// reads to start, a read per message, and a read when the owner's lease is
// due to lapse (to see whether it was renewed; an owner renewing as
// documented moves that point once per lease at most). If the subscription
// connection drops, every waiter reads the record at once and again after
// go-redis has subscribed anew, so a message lost meanwhile costs nothing
// but those reads.
//
// Wait returns ctx's error when ctx ends first, idem.ErrUnavailable when a
// read fails or outlasts WithTimeout, and idem.ErrUnavailable wrapping
// idem.ErrClosed after Close.
func (l *Layer) Wait(ctx context.Context, key idem.Key) (idem.Record, error) {
	if key.IsZero() {
		return idem.Record{}, idem.ErrInvalidKey
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	ch := channel(l.name(key))
	callCtx, cancel := l.bound(ctx)
	w, err := l.hub.acquire(callCtx, ch)
	cancel()
	if w != nil {
		defer l.hub.release(w)
	}
	switch {
	case errors.Is(err, idem.ErrClosed):
		return idem.Record{}, errWaitClosed
	case err != nil:
		return idem.Record{}, l.fail(ctx, "subscribe", err)
	}
	var lapse *time.Timer
	defer func() {
		if lapse != nil {
			lapse.Stop()
		}
	}()
	var lapsed <-chan time.Time
	stale := true // an event came since the last read
	for {
		// The event channel is taken before the read, so an event during
		// the read is not lost. Events: the subscription's confirmation (the
		// read before it may have missed a publish), a message, a lost
		// connection, Close.
		ev, closed := l.hub.snapshot(w)
		if closed {
			return idem.Record{}, errWaitClosed
		}
		if stale {
			rec, left, err := l.read(ctx, key, true)
			switch {
			case err != nil:
				return idem.Record{}, err
			case rec.Completed():
				return rec, nil
			case left <= 0:
				return idem.Record{}, fmt.Errorf("%w: the owner's lease lapsed", idem.ErrNotFound)
			}
			if lapse == nil {
				lapse = time.NewTimer(left + leaseSlack)
			} else {
				lapse.Reset(left + leaseSlack)
			}
			lapsed = lapse.C
			stale = false
		}
		select {
		case <-ev:
			stale = true
		case <-lapsed:
			lapsed = nil
			stale = true
		case <-ctx.Done():
			return idem.Record{}, ctx.Err()
		}
	}
}
