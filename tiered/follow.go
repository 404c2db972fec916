package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// follow waits for the execution c that another caller in this process
// leads, as a duplicate waits for an owner on another instance: at most the
// Store's wait from start, and no longer than ctx lasts. The execution
// itself goes on whatever this caller does.
func (s *Store) follow(ctx context.Context, c *call, start time.Time) (Result, error) {
	if start.IsZero() {
		start = time.Now()
	}
	waited := false
	select {
	case <-c.flight.Done(): // ended already: no timer needed
	default:
		if err := s.await(ctx, c, start); err != nil {
			return Result{}, err
		}
		waited = true
	}
	o := c.out
	o.result.Replayed = true
	o.result.Waited = waited
	if errors.Is(o.err, ErrPending) || errors.Is(o.err, idem.ErrLeaseLost) || errors.Is(o.err, idem.ErrClosed) || errors.Is(o.err, ErrNotCommitted) {
		// The leader's value is not the key's result: it may never be
		// stored, or another owner's stands. Only the leader sees it.
		o.result.Value = nil
	}
	switch {
	case o.err == nil:
		o.result.Tier = idem.TierLocal
		if waited {
			s.observe(ctx, idem.EventWaited, idem.TierLocal, c.key, time.Since(start), nil)
		}
		s.observe(ctx, idem.EventReplay, idem.TierLocal, c.key, 0, nil)
	case errors.Is(o.err, idem.ErrMismatch):
		o.result.Tier = idem.TierLocal
		s.observe(ctx, idem.EventMismatch, idem.TierLocal, c.key, 0, nil)
	case errors.Is(o.err, idem.ErrInFlight):
		o.result.Tier = idem.TierLocal
		s.observe(ctx, idem.EventInFlight, idem.TierLocal, c.key, time.Since(start), nil)
	}
	return o.result, o.err
}

// await waits for c to end, for at most the Store's wait since start and
// while ctx lasts.
func (s *Store) await(ctx context.Context, c *call, start time.Time) error {
	wait := time.NewTimer(s.cfg.wait - time.Since(start))
	defer wait.Stop()
	select {
	case <-c.flight.Done():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-wait.C:
		s.observe(ctx, idem.EventInFlight, idem.TierLocal, c.key, time.Since(start), nil)
		return idem.ErrInFlight
	case <-s.base.Done():
		return idem.ErrClosed
	}
}
