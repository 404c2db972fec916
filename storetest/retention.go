package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Retention and the grace. A claim's record is kept for the retention, or
// longer when its lease needs it; either way it must outlive the lease and
// the grace after it, however long the work runs and whatever the
// retention, or a lapsed lease gets no grace and the layer's sweep deletes
// a claim that is still its owner's to complete.

// sweep runs the backend's sweep, when it has one of its own.
func (s *suite) sweep(t *testing.T) {
	t.Helper()
	if s.h.Sweep != nil {
		s.h.Sweep(t)
	}
}

// waitSince lets d pass on the backend's clock since st, what calls took
// since then included: a case that must land within a window counts it
// from the write that opened it.
func (s *suite) waitSince(t *testing.T, st stamp, d time.Duration) {
	t.Helper()
	if left := d - s.since(st); left > 0 {
		s.wait(t, left)
	}
}

// retentionLapse is how long the retention cases wait, from the write that
// set a lease, before the calls that must come after the lease and within
// its grace: half a Tick past the lease. The write happened by the store's
// clock before the suite's stamp, and no sleep ends early, so the calls
// come after the lease; the rest of the grace, 5½ Ticks, is left to what
// the machine's load adds to the sleep and the calls.
func (s *suite) retentionLapse(lease time.Duration) time.Duration { return lease + s.h.Tick/2 }

// renewedPastRetention: a claim whose retention is shorter than its lease,
// renewed after the retention has passed, is in flight during its lease;
// the first Reserve after the lease grants the owner a grace instead of
// taking over, and only one after the grace takes over. The lease is
// 24×Tick, so its grace is 6×Tick, and the Reserve after the lease comes
// early in it (see retentionLapse).
func (s *suite) renewedPastRetention(t *testing.T) {
	tick := s.h.Tick
	lease := 24 * tick
	l, other := s.h.New(t), s.h.New(t)
	var (
		k   idem.Key
		old idem.Record
	)
	untilInWindow(t, func() (missed bool) {
		k = s.key()
		var claimed bool
		var err error
		old, claimed, err = l.Reserve(ctx(t), k, fpA, lease, tick)
		if err != nil || !claimed {
			t.Fatalf("Reserve on a new key: claimed=%v err=%v, want a claim", claimed, err)
		}
		s.wait(t, 2*tick) // past the retention, within the lease
		beforeRenew := s.now()
		wantNoErr(t, "owner Renew past the retention", l.Renew(ctx(t), k, old.Token, lease))
		renewed := s.now()
		rec, claimed, err := other.Reserve(ctx(t), k, fpA, lease, long)
		wantNoErr(t, "Reserve during the renewed lease", err)
		if claimed || rec.State != idem.StateInProgress || rec.Token != "" {
			t.Fatalf("Reserve during the renewed lease: claimed=%v rec=%+v, want the owner's claim in flight", claimed, rec)
		}
		s.sweep(t) // during the lease; and a first sweep is not timed below
		s.waitSince(t, renewed, s.retentionLapse(lease))
		s.sweep(t)
		return s.graceOrMissed(t, "Reserve after the renewed lease, within its grace", other, k, beforeRenew, lease)
	})
	s.wait(t, s.graceLease()/4+tick) // past the grace the Reserve granted
	rec, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
	wantNoErr(t, "Reserve after the grace", err)
	if !claimed || rec.Token == "" || rec.Token == old.Token {
		t.Fatalf("Reserve after the grace: claimed=%v rec=%+v (old token %q), want a new claim", claimed, rec, old.Token)
	}
	wantErr(t, "stale owner Complete", l.Complete(ctx(t), k, old.Token, []byte("stale"), long), idem.ErrLeaseLost)
}

// sweepKeepsLapsedClaim: the backend's sweep (where it has one) deletes
// expired records only: a claim whose lease lapsed while its record lives
// stays, so that the next Reserve grants its owner the grace and the owner
// completes within it. One claim keeps its record for less than its lease
// (24×Tick, so its grace is 6×Tick), the other for long, with the sweep
// running after the lease, early in the grace (see retentionLapse).
func (s *suite) sweepKeepsLapsedClaim(t *testing.T) {
	tick := s.h.Tick
	lease := 24 * tick
	l, other := s.h.New(t), s.h.New(t)
	type seeded struct {
		what string
		k    idem.Key
		old  idem.Record
	}
	var claims []seeded
	untilInWindow(t, func() (missed bool) {
		claims = claims[:0]
		var first stamp
		before := s.now() // the first claim's lease, and its grace, end after before
		for _, c := range []struct {
			what       string
			lease, ttl time.Duration
		}{
			{"a claim kept for less than its lease", lease, tick},
			{"a claim kept for long", tick, long},
		} {
			k := s.key()
			old, claimed, err := l.Reserve(ctx(t), k, fpA, c.lease, c.ttl)
			if err != nil || !claimed {
				t.Fatalf("%s: Reserve on a new key: claimed=%v err=%v, want a claim", c.what, claimed, err)
			}
			if len(claims) == 0 {
				first = s.now()
			}
			claims = append(claims, seeded{c.what, k, old})
		}
		s.sweep(t) // during the lease; and a first sweep is not timed below
		s.waitSince(t, first, s.retentionLapse(lease))
		s.sweep(t)
		// Only the first claim's record ends with its grace: the second
		// lives long, and is graced whenever it is asked. Each owner
		// completes within the grace its Reserve granted, or the attempt
		// proves nothing and runs again.
		asked := s.now()
		if s.graceOrMissed(t, claims[0].what+": Reserve after the lease and a sweep", other, claims[0].k, before, lease) ||
			s.completeOrMissed(t, claims[0].what+": owner Complete within the grace", l, claims[0].k, claims[0].old.Token, asked) {
			return true
		}
		asked = s.now()
		s.wantGrace(t, claims[1].what+": Reserve after the lease and a sweep", other, claims[1].k)
		return s.completeOrMissed(t, claims[1].what+": owner Complete within the grace", l, claims[1].k, claims[1].old.Token, asked)
	})
	s.sweep(t)
	for _, c := range claims {
		if g := mustGet(t, other, c.k); g.State != idem.StateCompleted || string(g.Result) != "late" {
			t.Fatalf("%s: after the owner's completion and a sweep, Get = %+v", c.what, g)
		}
	}
}

// notLiveAtExpiry: a record lives until its expiry, not at it. Only a
// backend with an injectable clock can stop the clock on that instant.
func (s *suite) notLiveAtExpiry(t *testing.T) {
	if s.h.Advance == nil {
		t.Skip("the backend runs on a real clock: no call can land on a record's expiry")
	}
	tick := s.h.Tick
	retention := 4 * tick
	l, other := s.h.New(t), s.h.New(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("brief"), retention))
	s.wait(t, retention-time.Millisecond)
	if g, err := other.Get(ctx(t), k); err != nil || string(g.Result) != "brief" {
		t.Fatalf("Get a millisecond before the record expires: rec=%+v err=%v, want the record", g, err)
	}
	s.wait(t, time.Millisecond)
	if g, err := other.Get(ctx(t), k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get at the instant the record expires: rec=%+v err=%v, want idem.ErrNotFound", g, err)
	}
	next, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
	wantNoErr(t, "Reserve at the instant the record expires", err)
	if !claimed || next.Token == rec.Token {
		t.Fatalf("Reserve at the instant the record expires: claimed=%v rec=%+v, want a new claim", claimed, next)
	}
}
