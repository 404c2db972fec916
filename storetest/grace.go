package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// The grace before a takeover: the first Reserve that finds an in-progress
// lease lapsed extends it by a quarter of the lease it passes and reports
// the record in progress; only a Reserve that finds the grace lapsed too
// takes it over. The cases pass a lease of 8×Tick, so that the grace (2×Tick)
// outlasts a few calls on a slow machine, and wait 3×Tick for it to lapse.

// graceLease is the lease the grace cases' Reserves pass: their grace is a
// quarter of it.
func (s *suite) graceLease() time.Duration { return 8 * s.h.Tick }

// lapse claims a fresh key with a lease of Tick on l and waits it out.
func (s *suite) lapse(t *testing.T, l idem.Layer) (idem.Key, idem.Record) {
	t.Helper()
	k, rec := s.claim(t, l, s.h.Tick)
	s.wait(t, 2*s.h.Tick)
	return k, rec
}

// wantGrace checks that a Reserve on a lapsed lease was refused as in
// progress, and returns the record it saw.
func (s *suite) wantGrace(t *testing.T, what string, l idem.Layer, k idem.Key) idem.Record {
	t.Helper()
	rec, claimed, err := l.Reserve(ctx(t), k, fpA, s.graceLease(), long)
	wantNoErr(t, what, err)
	if claimed || rec.State != idem.StateInProgress || rec.Fingerprint != fpA || rec.Token != "" {
		t.Fatalf("%s: claimed=%v rec=%+v, want the owner's record in progress, not claimed", what, claimed, rec)
	}
	if rec.ExpiresIn <= 0 {
		t.Fatalf("%s: ExpiresIn %v, want the time the record has left", what, rec.ExpiresIn)
	}
	return rec
}

// graceOrMissed is wantGrace for a Reserve that must come within a lapsed
// lease's grace, which ends a quarter of the lease past the lease, at the
// earliest counted from wrote (a stamp taken before the write that set the
// lease). A Reserve that returned later than that may rightly have taken
// the key over, and proves nothing: missed says so, and the case runs
// again with a new key, as the grace cases do on a busy machine.
func (s *suite) graceOrMissed(t *testing.T, what string, l idem.Layer, k idem.Key, wrote stamp, lease time.Duration) (missed bool) {
	t.Helper()
	rec, claimed, err := l.Reserve(ctx(t), k, fpA, s.graceLease(), long)
	took := s.since(wrote)
	wantNoErr(t, what, err)
	if claimed && took >= lease+lease/4 {
		t.Logf("%s: returned %v after the lease was set, past its grace: run again", what, took)
		return true
	}
	if claimed || rec.State != idem.StateInProgress || rec.Fingerprint != fpA || rec.Token != "" {
		t.Fatalf("%s (%v after the lease was set): claimed=%v rec=%+v, want the owner's record in progress, not claimed", what, took, claimed, rec)
	}
	if rec.ExpiresIn <= 0 {
		t.Fatalf("%s: ExpiresIn %v, want the time the record has left", what, rec.ExpiresIn)
	}
	return false
}

// completeOrMissed has the owner of the claim on k, whose lapsed lease a
// Reserve sent at asked found and graced (for a quarter of its
// graceLease), complete it with "late". A completion that returned later
// than that grace may rightly have lost the key, and proves nothing:
// missed says so, and the case runs again with a new key.
func (s *suite) completeOrMissed(t *testing.T, what string, l idem.Layer, k idem.Key, token string, asked stamp) (missed bool) {
	t.Helper()
	err := l.Complete(ctx(t), k, token, []byte("late"), long)
	if took := s.since(asked); errors.Is(err, idem.ErrLeaseLost) && took >= s.graceLease()/4 {
		t.Logf("%s: returned %v after the grace was asked for, past it: run again", what, took)
		return true
	}
	wantNoErr(t, what, err)
	return false
}

// graceAttempts is how many times a case whose timing missed its window
// runs before it fails.
const graceAttempts = 5

// untilInWindow runs attempt (which takes new keys) until its timing lands
// in the window it needs, and fails t after graceAttempts misses.
func untilInWindow(t *testing.T, attempt func() (missed bool)) {
	t.Helper()
	for n := 1; attempt(); n++ {
		if n == graceAttempts {
			t.Fatalf("%d attempts, each too slow for the grace's window", graceAttempts)
		}
	}
}

// expiredLeaseTakenOver: an owner that stops renewing loses the key, but
// not to the first Reserve that finds its lease lapsed: that one grants a
// grace and answers in progress. The Reserve after the grace takes over with
// a new token, and the old one stops working.
func (s *suite) expiredLeaseTakenOver(t *testing.T) {
	tick := s.h.Tick
	l, other := s.h.New(t), s.h.New(t)
	k, old := s.lapse(t, l)
	first := s.wantGrace(t, "first Reserve after the lease lapsed", other, k)
	if first.LeaseUntil.IsZero() {
		t.Fatal("a record in its grace has no lease end")
	}
	s.wantGrace(t, "second Reserve within the grace", other, k)
	s.wait(t, 3*tick)
	rec, claimed, err := other.Reserve(ctx(t), k, fpA, long, long)
	wantNoErr(t, "Reserve after the grace", err)
	if !claimed || rec.Token == "" || rec.Token == old.Token {
		t.Fatalf("lapsed grace: claimed=%v token=%q (old %q), want a takeover with a new token", claimed, rec.Token, old.Token)
	}
	wantErr(t, "stale owner Renew", l.Renew(ctx(t), k, old.Token, long), idem.ErrLeaseLost)
	wantErr(t, "stale owner Complete", l.Complete(ctx(t), k, old.Token, []byte("stale"), long), idem.ErrLeaseLost)
	wantErr(t, "stale owner Release", l.Release(ctx(t), k, old.Token), idem.ErrLeaseLost)
	wantNoErr(t, "new owner Complete", other.Complete(ctx(t), k, rec.Token, []byte("winner"), long))
	wantErr(t, "stale owner Complete after the winner", l.Complete(ctx(t), k, old.Token, []byte("stale"), long), idem.ErrLeaseLost)
	if g := mustGet(t, l, k); string(g.Result) != "winner" {
		t.Fatalf("stored result %q, want the winner's", g.Result)
	}
}

// graceKeepsOwner: during the grace the old owner's token still works. Its
// Complete lands and every later Reserve replays it; its Release frees the
// key for the next claim.
func (s *suite) graceKeepsOwner(t *testing.T) {
	l, other := s.h.New(t), s.h.New(t)
	k, old := s.lapse(t, l)
	s.wantGrace(t, "Reserve after the lease lapsed", other, k)
	wantNoErr(t, "owner Complete during the grace", l.Complete(ctx(t), k, old.Token, []byte("owner's"), long))
	s.wait(t, 3*s.h.Tick) // past the grace: the completion holds
	rec, claimed, err := other.Reserve(ctx(t), k, fpA, s.graceLease(), long)
	wantNoErr(t, "Reserve after the owner completed", err)
	if claimed || rec.State != idem.StateCompleted || string(rec.Result) != "owner's" {
		t.Fatalf("Reserve after a completion in the grace: claimed=%v rec=%+v, want the owner's result", claimed, rec)
	}

	k2, old2 := s.lapse(t, l)
	s.wantGrace(t, "Reserve after the lease lapsed", other, k2)
	wantNoErr(t, "owner Release during the grace", l.Release(ctx(t), k2, old2.Token))
	next, claimed, err := other.Reserve(ctx(t), k2, fpA, s.graceLease(), long)
	wantNoErr(t, "Reserve after the owner released", err)
	if !claimed || next.Token == old2.Token {
		t.Fatalf("Reserve after a release in the grace: claimed=%v rec=%+v, want a new claim", claimed, next)
	}
}

// graceOncePerLapse: an owner that renews during its grace is back on a
// normal lease, and the next lapse gets a grace again; a grace that lapsed
// without a renewal is not granted twice.
func (s *suite) graceOncePerLapse(t *testing.T) {
	tick := s.h.Tick
	l, other := s.h.New(t), s.h.New(t)
	k, old := s.lapse(t, l)
	s.wantGrace(t, "Reserve after the first lapse", other, k)
	wantNoErr(t, "owner Renew during the grace", l.Renew(ctx(t), k, old.Token, tick))
	s.wait(t, 2*tick) // the renewed lease lapses; so would the grace
	s.wantGrace(t, "Reserve after the renewed lease lapsed", other, k)
	wantNoErr(t, "owner Renew during the second grace", l.Renew(ctx(t), k, old.Token, tick))
	s.wait(t, 2*tick)
	s.wantGrace(t, "Reserve after the third lapse", other, k)
	s.wait(t, 3*tick) // no renewal this time
	rec, claimed, err := other.Reserve(ctx(t), k, fpA, s.graceLease(), long)
	wantNoErr(t, "Reserve after the grace lapsed", err)
	if !claimed || rec.Token == old.Token {
		t.Fatalf("Reserve after an unrenewed grace: claimed=%v rec=%+v, want a takeover", claimed, rec)
	}
	wantErr(t, "old owner Renew after the takeover", l.Renew(ctx(t), k, old.Token, long), idem.ErrLeaseLost)
}

// graceConcurrent: many Reserves at once on a lapsed lease, over several
// instances. Within the grace none claims, and all see one grace (one lease
// end): exactly one of them granted it. After the grace exactly one takes
// over.
func (s *suite) graceConcurrent(t *testing.T) {
	tick := s.h.Tick
	ls := s.instances(t, 4)
	// A grace long enough for every contender of the first wave to answer
	// within it, on a loaded machine too (a quarter of the lease: 20 ticks).
	lease := 80 * tick
	k, old := s.lapse(t, ls[0])

	wave := func(what string) (claims int32, seen []idem.Record) {
		var (
			n     atomic.Int32
			start = make(chan struct{})
			wg    sync.WaitGroup
			mu    sync.Mutex
		)
		for i := range s.h.Contenders {
			wg.Go(func() {
				<-start
				rec, claimed, err := ls[i%len(ls)].Reserve(ctx(t), k, fpA, lease, long)
				if err != nil {
					t.Errorf("%s: Reserve: %v", what, err)
					return
				}
				if claimed {
					n.Add(1)
					return
				}
				mu.Lock()
				seen = append(seen, rec)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		return n.Load(), seen
	}

	claims, seen := wave("within the grace")
	if claims != 0 {
		t.Fatalf("%d Reserves on a lapsed lease: %d claimed before the grace lapsed, want none", s.h.Contenders, claims)
	}
	for _, r := range seen {
		if r.State != idem.StateInProgress || !r.LeaseUntil.Equal(seen[0].LeaseUntil) {
			t.Fatalf("Reserves within the grace saw %+v and %+v: want one grace, granted once", seen[0], r)
		}
	}
	if !seen[0].LeaseUntil.After(old.LeaseUntil) {
		t.Fatalf("the grace ends at %v, not after the lapsed lease (%v)", seen[0].LeaseUntil, old.LeaseUntil)
	}
	s.wait(t, lease/4+tick)
	if claims, _ := wave("after the grace"); claims != 1 {
		t.Fatalf("%d Reserves after the grace lapsed: %d claims, want exactly 1", s.h.Contenders, claims)
	}
	wantErr(t, "old owner Complete after the takeover", ls[0].Complete(ctx(t), k, old.Token, []byte("late"), long), idem.ErrLeaseLost)
}

// graceOutlivesExpiry: a grace that would end after the record expires
// keeps the record until the grace ends, so that the owner can still
// complete within it.
func (s *suite) graceOutlivesExpiry(t *testing.T) {
	tick := s.h.Tick
	l, other := s.h.New(t), s.h.New(t)
	// The case needs the second Reserve inside a window of 2 ticks and the
	// owner's completion inside the grace. On a real clock a loaded machine
	// can overshoot either; an attempt whose timing missed its window, as
	// measured, proves nothing either way and is run again with a new key.
	for attempt := 1; ; attempt++ {
		missed := func(format string, args ...any) {
			if attempt == graceAttempts {
				t.Fatalf("%d attempts, each too slow for its window: last, "+format, append([]any{graceAttempts}, args...)...)
			}
			t.Logf("attempt %d missed its window: "+format, append([]any{attempt}, args...)...)
		}
		k := s.key()
		st := s.now() // the record expires 8 ticks after its claim, at the earliest this
		old, claimed, err := l.Reserve(ctx(t), k, fpA, 4*tick, 8*tick)
		if err != nil || !claimed {
			t.Fatalf("Reserve on a new key: claimed=%v err=%v", claimed, err)
		}
		s.wait(t, 6*tick) // the lease lapsed; the record has 2 ticks left
		// A grace of 10 ticks: the owner completes 4 ticks in, 2 past the
		// record's first expiry, with room on both sides for a busy machine.
		graced := s.now()
		rec, claimed, err := other.Reserve(ctx(t), k, fpA, 40*tick, long)
		wantNoErr(t, "Reserve after the lease lapsed", err)
		if claimed || rec.State != idem.StateInProgress {
			if took := s.since(st); took >= 8*tick {
				missed("the Reserve after the lease lapsed returned %v after the claim, past the record's expiry", took)
				continue
			}
			t.Fatalf("Reserve after the lease lapsed: claimed=%v rec=%+v, want the owner's grace", claimed, rec)
		}
		if rec.ExpiresIn < 8*tick {
			t.Fatalf("the record's ExpiresIn is %v within a grace of %v", rec.ExpiresIn, 10*tick)
		}
		s.wait(t, 4*tick) // past the record's first expiry, within the grace
		err = l.Complete(ctx(t), k, old.Token, []byte("in time"), long)
		if err != nil && s.since(graced) >= 10*tick {
			missed("the owner's completion came %v after the grace began, past its end", s.since(graced))
			continue
		}
		wantNoErr(t, "owner Complete after the record's first expiry, within the grace", err)
		return
	}
}

// expiredLeaseOtherFingerprint: a claim for another fingerprint never takes
// a lapsed lease over, nor grants it a grace, however long it lapsed.
func (s *suite) expiredLeaseOtherFingerprint(t *testing.T) {
	tick := s.h.Tick
	l := s.h.New(t)
	k, old := s.lapse(t, l)
	for i := range 2 {
		rec, claimed, err := l.Reserve(ctx(t), k, fpB, s.graceLease(), long)
		wantNoErr(t, "Reserve with another fingerprint after expiry", err)
		if claimed || rec.Fingerprint != fpA || rec.State != idem.StateInProgress {
			t.Fatalf("round %d: another fingerprint took over a lapsed claim: claimed=%v rec=%+v", i, claimed, rec)
		}
		s.wait(t, 3*tick) // past any grace
	}
	// The owner's claim is still there, lapsed: its own fingerprint gets
	// the grace first.
	s.wantGrace(t, "Reserve with the owner's fingerprint", l, k)
	wantNoErr(t, "owner Complete", l.Complete(ctx(t), k, old.Token, []byte("late but kept"), long))
}
