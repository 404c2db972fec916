package storetest

import (
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Record.ExpiresIn is how long a record had left when the layer answered,
// by the store's clock: the record lives at least until the call was sent
// plus ExpiresIn. A cache of the record relies on it never being more than
// that, so the cases check it against what the suite can know of the
// store's clock: a record written with a ttl has at most the ttl left,
// less the time that has passed since the write returned.

// clockSlack allows for the resolution of the stores' clocks (SQLite
// rounds to milliseconds, Redis counts whole milliseconds) when ExpiresIn is
// compared with the application's clock.
const clockSlack = 10 * time.Millisecond

// wantLeft checks rec.ExpiresIn against a record written with ttl: more
// than nothing, more than half the ttl when the write was recent (no case
// waits that long), and no more than the ttl less the time the store has
// counted since the write returned, up to the moment the call that answered
// rec was sent (elapsed, from suite.since).
func (s *suite) wantLeft(t *testing.T, what string, rec idem.Record, ttl, elapsed time.Duration) {
	t.Helper()
	if rec.ExpiresIn <= ttl/2 {
		t.Fatalf("%s: ExpiresIn %v, want more than %v (ttl %v, %v passed since the write)", what, rec.ExpiresIn, ttl/2, ttl, elapsed)
	}
	s.wantAtMost(t, what, rec, ttl, elapsed)
}

// wantAtMost checks only that rec.ExpiresIn promises no more than a record
// written with ttl can have left (see wantLeft), and is not negative.
func (s *suite) wantAtMost(t *testing.T, what string, rec idem.Record, ttl, elapsed time.Duration) {
	t.Helper()
	slack := clockSlack
	if s.h.Advance != nil {
		slack = time.Millisecond
	}
	if limit := ttl - elapsed + slack; rec.ExpiresIn < 0 || rec.ExpiresIn > limit {
		t.Fatalf("%s: ExpiresIn %v, want at most %v (ttl %v, %v passed since the write)", what, rec.ExpiresIn, limit, ttl, elapsed)
	}
}

// expiresIn: every record a layer returns says how long it has left, by
// the store's clock, in progress and completed, from Reserve (the claim, a
// duplicate, another fingerprint) and Get, and the figure runs down with
// the store's clock. One answer may be a conservative figure: an
// in-progress record shown to another fingerprint (a mismatch), which no
// one caches and which a layer may read without the store's clock at hand
// (the Redis layer's one-command read); it must still promise no more than
// the record has.
func (s *suite) expiresIn(t *testing.T) {
	l, other := s.h.New(t), s.h.New(t)
	const retention = long / 2 // unlike the claim's ttl, so a completion's own shows

	// A lease short enough that the claim is kept for its ttl: a longer
	// one, with its grace, would keep it longer.
	k, claim := s.claim(t, l, long/2)
	s.wantLeft(t, "the claim", claim, long, 0)
	written := s.now()
	reads := []struct {
		name string
		// bound: in progress, the figure may be a bound that does not run
		// down.
		bound bool
		read  func(t *testing.T) idem.Record
	}{
		{"duplicate Reserve", false, func(t *testing.T) idem.Record {
			rec, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
			if err != nil || claimed {
				t.Fatalf("duplicate Reserve: claimed=%v err=%v", claimed, err)
			}
			return rec
		}},
		{"Reserve with another fingerprint", true, func(t *testing.T) idem.Record {
			rec, claimed, err := other.Reserve(ctx(t), k, fpB, long, long)
			if err != nil || claimed {
				t.Fatalf("Reserve with another fingerprint: claimed=%v err=%v", claimed, err)
			}
			return rec
		}},
		{"Get", false, func(t *testing.T) idem.Record { return mustGet(t, other, k) }},
	}
	check := func(state idem.State, ttl time.Duration, st stamp) {
		t.Helper()
		first := make([]idem.Record, len(reads))
		for i, r := range reads {
			elapsed := s.since(st)
			first[i] = r.read(t)
			if first[i].State != state {
				t.Fatalf("%s: state %v, want %v", r.name, first[i].State, state)
			}
			if r.bound && state == idem.StateInProgress {
				s.wantAtMost(t, state.String()+": "+r.name, first[i], ttl, elapsed)
				continue
			}
			s.wantLeft(t, state.String()+": "+r.name, first[i], ttl, elapsed)
		}
		s.wait(t, s.h.Tick)
		for i, r := range reads {
			elapsed := s.since(st)
			later := r.read(t)
			if r.bound && state == idem.StateInProgress {
				s.wantAtMost(t, state.String()+": "+r.name+" later", later, ttl, elapsed)
				continue
			}
			s.wantLeft(t, state.String()+": "+r.name+" later", later, ttl, elapsed)
			if later.ExpiresIn >= first[i].ExpiresIn {
				t.Fatalf("%s: ExpiresIn %v, then %v a tick later: want it to run down", r.name, first[i].ExpiresIn, later.ExpiresIn)
			}
		}
	}
	check(idem.StateInProgress, long, written)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, claim.Token, []byte("done"), retention))
	check(idem.StateCompleted, retention, s.now())
}

// expiresInBound: a record lives at least until the call that returned it
// was sent, plus its ExpiresIn. Only a backend with an injectable clock can
// check it to the millisecond; on a real clock the bound in wantLeft is
// what the suite can check without racing the clock.
func (s *suite) expiresInBound(t *testing.T) {
	tick := s.h.Tick
	l, other := s.h.New(t), s.h.New(t)
	var (
		k       idem.Key
		got     idem.Record
		claimed bool
		err     error
	)
	for attempt := 1; ; attempt++ {
		var rec idem.Record
		k, rec = s.claim(t, l, long)
		sent := time.Now()
		wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("brief"), 4*tick))
		s.wait(t, tick)
		got, claimed, err = other.Reserve(ctx(t), k, fpA, long, long)
		// On a real clock a machine that stalled for the record's whole
		// life leaves nothing to check: the record may have expired before
		// the Reserve reached it. Then the row runs again, twice at most.
		if s.h.Advance != nil || time.Since(sent) < 4*tick-clockSlack || attempt == 3 {
			break
		}
	}
	if err != nil || claimed || got.ExpiresIn <= 0 || got.ExpiresIn > 3*tick+clockSlack {
		t.Fatalf("Reserve of a record with 3 ticks left: claimed=%v ExpiresIn=%v err=%v", claimed, got.ExpiresIn, err)
	}
	if s.h.Advance == nil {
		return
	}
	s.wait(t, got.ExpiresIn-time.Millisecond)
	if g, err := l.Get(ctx(t), k); err != nil || string(g.Result) != "brief" {
		t.Fatalf("Get a millisecond before the record's ExpiresIn ran out: rec=%+v err=%v, want the record", g, err)
	}
}
