package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// waitLimit bounds every Wait the optional suites expect to end on its own.
const waitLimit = 10 * time.Second

// RunWaiter runs the conformance cases of idem.Waiter against h: a waiter
// on any instance learns of a completion, a release or a lapsed lease, and a
// takeover keeps it waiting. Every layer h.New returns must implement
// idem.Waiter.
func RunWaiter(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"CompletedWhileWaiting", s.waitCompleted},
		{"AlreadyCompleted", s.waitAlreadyCompleted},
		{"MissingKey", s.waitMissing},
		{"ReleaseEndsWait", s.waitReleased},
		{"LapsedLeaseEndsWait", s.waitLapsed},
		{"GraceKeepsWaiting", s.waitGrace},
		{"TakeoverKeepsWaiting", s.waitTakeover},
		{"ContextEnds", s.waitContextEnds},
		{"ManyWaiters", s.waitMany},
		{"ZeroKeyRejected", s.waitZeroKey},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// RunFiller runs the conformance cases of idem.Filler against h: a fill
// stores a completed record, replaces an in-progress one whatever its
// token, leaves a completed one alone and expires after its ttl. When the
// layers also implement idem.Waiter, a fill wakes waiters. Every layer h.New
// returns must implement idem.Filler.
func RunFiller(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"FillMissing", s.fillMissing},
		{"FillReplacesInProgress", s.fillReplaces},
		{"FillKeepsCompleted", s.fillKeepsCompleted},
		{"FillRetention", s.fillRetention},
		{"FillWakesWaiters", s.fillWakes},
		{"FillRejectsInProgressRecord", s.fillRejectsInProgress},
		{"ZeroKeyRejected", s.fillZeroKey},
	} {
		t.Run(tc.name, tc.fn)
	}
}

func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is required")
	}
	if h.Tick <= 0 {
		h.Tick = DefaultTick
	}
	return &suite{h: h, scope: "storetest-" + randomHex(8)}
}

func (s *suite) waiter(t *testing.T) (idem.Layer, idem.Waiter) {
	t.Helper()
	l := s.h.New(t)
	w, ok := l.(idem.Waiter)
	if !ok {
		t.Fatalf("%T does not implement idem.Waiter", l)
	}
	return l, w
}

func (s *suite) filler(t *testing.T) (idem.Layer, idem.Filler) {
	t.Helper()
	l := s.h.New(t)
	f, ok := l.(idem.Filler)
	if !ok {
		t.Fatalf("%T does not implement idem.Filler", l)
	}
	return l, f
}

// waitResult is what a Wait running in the background returned.
type waitResult struct {
	rec idem.Record
	err error
	at  time.Time // when Wait returned, on the application's clock
}

// startWait runs w.Wait(key) in the background under a generous limit.
func startWait(t *testing.T, w idem.Waiter, k idem.Key) <-chan waitResult {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), waitLimit)
	out := make(chan waitResult, 1)
	go func() {
		defer cancel()
		rec, err := w.Wait(c, k)
		out <- waitResult{rec, err, time.Now()}
	}()
	return out
}

// blocked checks that a background Wait has not returned within d.
func blocked(t *testing.T, what string, got <-chan waitResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-got:
		t.Fatalf("%s: Wait returned early: rec=%+v err=%v", what, r.rec, r.err)
	case <-time.After(d):
	}
}

func (s *suite) waitCompleted(t *testing.T) {
	owner := s.h.New(t)
	_, w := s.waiter(t)
	k, rec := s.claim(t, owner, long)
	got := startWait(t, w, k)
	blocked(t, "in progress", got, s.h.Tick)
	wantNoErr(t, "Complete", owner.Complete(ctx(t), k, rec.Token, []byte("paid"), long))
	r := <-got
	wantNoErr(t, "Wait", r.err)
	if r.rec.State != idem.StateCompleted || string(r.rec.Result) != "paid" || r.rec.Token != "" || r.rec.Fingerprint != fpA {
		t.Fatalf("Wait = %+v, want the completed record without token", r.rec)
	}
	s.wantLeft(t, "Wait", r.rec, long, 0)
}

func (s *suite) waitAlreadyCompleted(t *testing.T) {
	l, w := s.waiter(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("done"), long))
	st := s.now()
	s.wait(t, s.h.Tick)
	elapsed := s.since(st)
	got, err := w.Wait(ctx(t), k)
	wantNoErr(t, "Wait", err)
	if string(got.Result) != "done" || got.Token != "" {
		t.Fatalf("Wait = %+v, want the stored result", got)
	}
	s.wantLeft(t, "Wait", got, long, elapsed)
}

func (s *suite) waitMissing(t *testing.T) {
	_, w := s.waiter(t)
	_, err := w.Wait(ctx(t), s.key())
	wantErr(t, "Wait on a key never claimed", err, idem.ErrNotFound)
}

func (s *suite) waitReleased(t *testing.T) {
	owner := s.h.New(t)
	_, w := s.waiter(t)
	k, rec := s.claim(t, owner, long)
	got := startWait(t, w, k)
	blocked(t, "in progress", got, s.h.Tick)
	wantNoErr(t, "Release", owner.Release(ctx(t), k, rec.Token))
	r := <-got
	wantErr(t, "Wait after Release", r.err, idem.ErrNotFound)
}

// waitLapsed: an owner that stops renewing is presumed dead once its lease
// lapses; the waiter hears ErrNotFound, so that its Reserve takes over.
func (s *suite) waitLapsed(t *testing.T) {
	owner := s.h.New(t)
	_, w := s.waiter(t)
	k, _ := s.claim(t, owner, s.h.Tick)
	got := startWait(t, w, k)
	s.wait(t, 2*s.h.Tick)
	r := <-got
	wantErr(t, "Wait on a lapsed lease", r.err, idem.ErrNotFound)
}

// waitGrace: a record whose lapsed lease a Reserve extended by a grace is
// in progress again: a waiter waits for it, and hears the owner's late
// completion. The grace is a quarter of graceLease from that Reserve; a
// Wait that ended as not found, or a completion refused, later than that
// proves nothing, and the case runs again with a new key.
func (s *suite) waitGrace(t *testing.T) {
	untilInWindow(t, func() bool { return s.waitGraceMissed(t) })
}

// waitGraceMissed runs waitGrace once, and reports whether its timing
// missed the grace's window.
func (s *suite) waitGraceMissed(t *testing.T) (missed bool) {
	t.Helper()
	owner := s.h.New(t)
	_, w := s.waiter(t)
	k, rec := s.lapse(t, owner)
	asked := s.now()
	s.wantGrace(t, "Reserve after the lease lapsed", s.h.New(t), k)
	// lapsed reports whether r is the grace's end, seen after it.
	lapsed := func(r waitResult) bool {
		took := s.since(asked)
		if s.h.Advance == nil {
			took = r.at.Sub(asked.real)
		}
		if errors.Is(r.err, idem.ErrNotFound) && took >= s.graceLease()/4 {
			t.Logf("Wait ended %v after the grace was asked for, past it: run again", took)
			return true
		}
		return false
	}
	got := startWait(t, w, k)
	select {
	case r := <-got:
		if lapsed(r) {
			return true
		}
		t.Fatalf("in the grace: Wait returned early: rec=%+v err=%v", r.rec, r.err)
	case <-time.After(s.h.Tick):
	}
	if s.completeOrMissed(t, "owner Complete during the grace", owner, k, rec.Token, asked) {
		<-got
		return true
	}
	r := <-got
	if lapsed(r) {
		return true
	}
	wantNoErr(t, "Wait", r.err)
	if string(r.rec.Result) != "late" {
		t.Fatalf("Wait = %+v, want the owner's late result", r.rec)
	}
	return false
}

func (s *suite) waitTakeover(t *testing.T) {
	tick := s.h.Tick
	first := s.h.New(t)
	_, w := s.waiter(t)
	k, _ := s.lapse(t, first)
	second := s.h.New(t)
	s.wantGrace(t, "Reserve after the lease lapsed", second, k)
	s.wait(t, 3*tick)
	rec, claimed, err := second.Reserve(ctx(t), k, fpA, long, long)
	if err != nil || !claimed {
		t.Fatalf("takeover: claimed=%v err=%v", claimed, err)
	}
	got := startWait(t, w, k)
	blocked(t, "taken over", got, 2*tick)
	wantNoErr(t, "new owner Complete", second.Complete(ctx(t), k, rec.Token, []byte("second"), long))
	r := <-got
	wantNoErr(t, "Wait", r.err)
	if string(r.rec.Result) != "second" {
		t.Fatalf("Wait = %+v, want the new owner's result", r.rec)
	}
}

func (s *suite) waitContextEnds(t *testing.T) {
	owner := s.h.New(t)
	_, w := s.waiter(t)
	k, _ := s.claim(t, owner, long)
	c, cancel := context.WithTimeout(t.Context(), s.h.Tick)
	defer cancel()
	_, err := w.Wait(c, k)
	wantErr(t, "Wait past its context", err, context.DeadlineExceeded)
	c2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	_, err = w.Wait(c2, k)
	wantErr(t, "Wait with a cancelled context", err, context.Canceled)
}

func (s *suite) waitMany(t *testing.T) {
	const n = 16
	owner := s.h.New(t)
	ws := make([]idem.Waiter, 4)
	for i := range ws {
		_, ws[i] = s.waiter(t)
	}
	k, rec := s.claim(t, owner, long)
	var wg sync.WaitGroup
	results := make(chan waitResult, n)
	for i := range n {
		wg.Go(func() {
			c, cancel := context.WithTimeout(t.Context(), waitLimit)
			defer cancel()
			r, err := ws[i%len(ws)].Wait(c, k)
			results <- waitResult{r, err, time.Now()}
		})
	}
	time.Sleep(s.h.Tick) // let the waiters block; a late one reads the result
	wantNoErr(t, "Complete", owner.Complete(ctx(t), k, rec.Token, []byte("all"), long))
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil || string(r.rec.Result) != "all" {
			t.Errorf("a waiter got rec=%+v err=%v", r.rec, r.err)
		}
	}
}

func (s *suite) waitZeroKey(t *testing.T) {
	_, w := s.waiter(t)
	_, err := w.Wait(ctx(t), idem.Key{})
	wantErr(t, "Wait with the zero key", err, idem.ErrInvalidKey)
}

func done(k idem.Key, fp, result string) idem.Record {
	return idem.Record{Key: k, Fingerprint: fp, State: idem.StateCompleted, Result: []byte(result)}
}

func (s *suite) fillMissing(t *testing.T) {
	l, f := s.filler(t)
	k := s.key()
	wantNoErr(t, "Fill", f.Fill(ctx(t), done(k, fpA, "from sql"), long))
	g := mustGet(t, l, k)
	if g.State != idem.StateCompleted || string(g.Result) != "from sql" || g.Fingerprint != fpA || g.Token != "" {
		t.Fatalf("Get after Fill = %+v", g)
	}
	s.wantLeft(t, "Get after Fill", g, long, 0)
	rec, claimed, err := s.h.New(t).Reserve(ctx(t), k, fpA, long, long)
	wantNoErr(t, "Reserve after Fill", err)
	if claimed || string(rec.Result) != "from sql" {
		t.Fatalf("Reserve after Fill: claimed=%v rec=%+v, want a replay", claimed, rec)
	}
	s.wantLeft(t, "Reserve after Fill", rec, long, 0)
}

func (s *suite) fillReplaces(t *testing.T) {
	l, f := s.filler(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Fill over an in-progress record", f.Fill(ctx(t), done(k, fpA, "decided"), long))
	if g := mustGet(t, l, k); g.State != idem.StateCompleted || string(g.Result) != "decided" {
		t.Fatalf("Get after Fill = %+v", g)
	}
	wantErr(t, "old owner Complete", l.Complete(ctx(t), k, rec.Token, []byte("late"), long), idem.ErrLeaseLost)
	wantErr(t, "old owner Release", l.Release(ctx(t), k, rec.Token), idem.ErrLeaseLost)
	if g := mustGet(t, l, k); string(g.Result) != "decided" {
		t.Fatalf("filled record changed by its old owner: %+v", g)
	}
}

func (s *suite) fillKeepsCompleted(t *testing.T) {
	l, f := s.filler(t)
	k, rec := s.claim(t, l, long)
	wantNoErr(t, "Complete", l.Complete(ctx(t), k, rec.Token, []byte("first"), long))
	wantNoErr(t, "Fill over a completed record", f.Fill(ctx(t), done(k, fpB, "second"), long))
	if g := mustGet(t, l, k); string(g.Result) != "first" || g.Fingerprint != fpA {
		t.Fatalf("Fill changed a completed record: %+v", g)
	}
}

func (s *suite) fillRetention(t *testing.T) {
	l, f := s.filler(t)
	k := s.key()
	wantNoErr(t, "Fill", f.Fill(ctx(t), done(k, fpA, "brief"), s.h.Tick))
	s.wait(t, 2*s.h.Tick)
	_, err := l.Get(ctx(t), k)
	wantErr(t, "Get after the fill's ttl", err, idem.ErrNotFound)
}

func (s *suite) fillWakes(t *testing.T) {
	l, f := s.filler(t)
	w, ok := s.h.New(t).(idem.Waiter)
	if !ok {
		t.Skip("the layer has no idem.Waiter")
	}
	k, _ := s.claim(t, l, long)
	got := startWait(t, w, k)
	blocked(t, "in progress", got, s.h.Tick)
	wantNoErr(t, "Fill", f.Fill(ctx(t), done(k, fpA, "filled"), long))
	r := <-got
	wantNoErr(t, "Wait", r.err)
	if string(r.rec.Result) != "filled" {
		t.Fatalf("Wait = %+v, want the filled record", r.rec)
	}
}

func (s *suite) fillRejectsInProgress(t *testing.T) {
	l, f := s.filler(t)
	k := s.key()
	rec := idem.Record{Key: k, Fingerprint: fpA, State: idem.StateInProgress}
	if err := f.Fill(ctx(t), rec, long); err == nil {
		t.Fatal("Fill of an in-progress record succeeded")
	}
	if _, err := l.Get(ctx(t), k); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after a refused Fill: %v, want ErrNotFound", err)
	}
}

func (s *suite) fillZeroKey(t *testing.T) {
	_, f := s.filler(t)
	wantErr(t, "Fill with the zero key", f.Fill(ctx(t), done(idem.Key{}, fpA, "x"), long), idem.ErrInvalidKey)
}
