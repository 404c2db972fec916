package memlayer_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestConformanceFakeClock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := must.Get(memlayer.New(memlayer.WithClock(clock.Now)))(t)
	storetest.Run(t, storetest.Harness{
		New:     func(*testing.T) idem.Layer { return l },
		Advance: func(_ *testing.T, d time.Duration) { clock.Advance(d) },
		Sweep:   func(*testing.T) { memlayer.Sweep(l) },
		Tick:    time.Second,
	})
}

func TestConformanceRealClock(t *testing.T) {
	l := must.Get(memlayer.New())(t)
	storetest.Run(t, storetest.Harness{
		New:   func(*testing.T) idem.Layer { return l },
		Sweep: func(*testing.T) { memlayer.Sweep(l) },
		// The suite's windows are a few Ticks wide: wide enough here that
		// a loaded machine's late sleeps stay inside them (20 ms did not).
		Tick: 100 * time.Millisecond,
	})
}

// A result over idem.MaxResult is refused with ErrTooLarge, one of
// idem.MaxResult bytes kept; a fingerprint over idem.MaxFingerprint is
// refused.
func TestMaxResult(t *testing.T) {
	l := must.Get(memlayer.New())(t)
	k := idem.NewKey("", "max")
	rec, _, err := l.Reserve(t.Context(), k, "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	over := make([]byte, idem.MaxResult+1)
	if err := l.Complete(t.Context(), k, rec.Token, over, time.Hour); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over the limit: %v, want ErrTooLarge", err)
	}
	if err := l.Complete(t.Context(), k, rec.Token, over[:idem.MaxResult], time.Hour); err != nil {
		t.Fatalf("Complete at the limit: %v", err)
	}
	long := strings.Repeat("f", idem.MaxFingerprint+1)
	if _, _, err := l.Reserve(t.Context(), idem.NewKey("", "fp"), long, time.Minute, time.Hour); err == nil {
		t.Fatal("Reserve with a fingerprint over idem.MaxFingerprint: no error")
	}
	if _, _, err := l.Reserve(t.Context(), idem.NewKey("", "fp"), long[1:], time.Minute, time.Hour); err != nil {
		t.Fatalf("Reserve with a fingerprint of idem.MaxFingerprint bytes: %v", err)
	}
}

func TestExpiredRecordsAreSwept(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := must.Get(memlayer.New(memlayer.WithClock(clock.Now)))(t)
	for i := range 1000 {
		k := idem.NewKey("sweep", string(rune('a'+i%26))+time.Duration(i).String())
		if _, _, err := l.Reserve(t.Context(), k, "fp", time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	for i := range 1100 {
		k := idem.NewKey("sweep2", time.Duration(i).String())
		if _, _, err := l.Reserve(t.Context(), k, "fp", time.Hour, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.Len(); n > 1100 {
		t.Fatalf("%d records stored, want expired ones swept (at most 1100 live)", n)
	}
}

// A sweep deletes a record only once the record itself has expired: one
// whose life a renewal or a completion extended past what it was when it
// was stored stays, and goes once that longer life is over.
func TestSweepKeepsExtendedRecords(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := must.Get(memlayer.New(memlayer.WithClock(clock.Now)))(t)
	renewed, completed := idem.NewKey("sweep", "renewed"), idem.NewKey("sweep", "completed")
	r1, _, err := l.Reserve(t.Context(), renewed, "fp", time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, _, err := l.Reserve(t.Context(), completed, "fp", time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context(), renewed, r1.Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(t.Context(), completed, r2.Token, []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	sweep := func(round string) { // enough Reserves for several sweeps
		for i := range 4000 {
			if _, _, err := l.Reserve(t.Context(), idem.NewKey("sweep-"+round, strconv.Itoa(i)), "fp", time.Second, time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(time.Minute) // past what both lives were when stored
	sweep("a")
	for _, k := range []idem.Key{renewed, completed} {
		if _, err := l.Get(t.Context(), k); err != nil {
			t.Fatalf("%v after its first life: %v, want it kept", k, err)
		}
	}
	clock.Advance(2 * time.Hour)
	sweep("b")
	if n := l.Len(); n > 4000 {
		t.Fatalf("%d records stored, want at most the 4000 live", n)
	}
}

// Every claim gets a token of its own, of idem.NewToken's form, and two
// layers never mint the same sequence.
func TestTokensAreFreshAndWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for layer := range 2 {
		l := must.Get(memlayer.New())(t)
		for i := range 1000 {
			rec, claimed, err := l.Reserve(t.Context(), idem.NewKey("tokens", strconv.Itoa(i)), "fp", time.Minute, time.Hour)
			if err != nil || !claimed {
				t.Fatalf("Reserve: claimed %v, %v", claimed, err)
			}
			if len(rec.Token) != idem.TokenSize || strings.Trim(rec.Token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				t.Fatalf("token %q is not %d characters of base64url", rec.Token, idem.TokenSize)
			}
			if seen[rec.Token] {
				t.Fatalf("layer %d, claim %d: token %q minted twice", layer, i, rec.Token)
			}
			seen[rec.Token] = true
		}
	}
}

// An option given nonsense is an error from New that wraps
// idem.ErrConfig and says, under the package and the option's name, what
// to give instead.
func TestNewValidatesOptions(t *testing.T) {
	_, err := memlayer.New(memlayer.WithClock(nil))
	if !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("New with a nil clock: %v, want ErrConfig", err)
	}
	if want := "idem: configuration error: memlayer: WithClock: give a clock"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the error reads %q, want it to start %q", err, want)
	}
}

// Entries that records left (released, expired) hold the next records,
// across the chunks of the layer's storage: each key keeps its own record,
// and a key that left is gone.
func TestEntriesAreReused(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := must.Get(memlayer.New(memlayer.WithClock(clock.Now)))(t)
	key := func(round string, i int) idem.Key { return idem.NewKey(round, strconv.Itoa(i)) }
	fp := func(round string, i int) string { return round + "/" + strconv.Itoa(i) }
	reserve := func(round string, n int, ttl time.Duration) []string {
		tokens := make([]string, n)
		for i := range n {
			rec, claimed, err := l.Reserve(t.Context(), key(round, i), fp(round, i), ttl, ttl)
			if err != nil || !claimed {
				t.Fatalf("Reserve %s: claimed %v, %v", fp(round, i), claimed, err)
			}
			tokens[i] = rec.Token
		}
		return tokens
	}
	want := func(round string, n int, live func(i int) bool) {
		t.Helper()
		for i := range n {
			rec, err := l.Get(t.Context(), key(round, i))
			switch {
			case live(i) && (err != nil || rec.Fingerprint != fp(round, i)):
				t.Fatalf("%s: %q, %v", fp(round, i), rec.Fingerprint, err)
			case !live(i) && !errors.Is(err, idem.ErrNotFound):
				t.Fatalf("%s left, but Get gives %q, %v", fp(round, i), rec.Fingerprint, err)
			}
		}
	}
	all := func(int) bool { return true }
	tokens := reserve("a", 1000, time.Hour)
	for i := 0; i < 1000; i += 2 {
		if err := l.Release(t.Context(), key("a", i), tokens[i]); err != nil {
			t.Fatal(err)
		}
	}
	reserve("b", 700, time.Minute) // 500 in the released entries, 200 new
	want("a", 1000, func(i int) bool { return i%2 == 1 })
	want("b", 700, all)
	clock.Advance(2 * time.Minute) // b expires
	reserve("c", 900, time.Hour)
	want("a", 1000, func(i int) bool { return i%2 == 1 })
	want("b", 700, func(int) bool { return false })
	want("c", 900, all)
	if n := l.Len(); n != 1400 {
		t.Fatalf("Len %d, want 1400", n)
	}
}
