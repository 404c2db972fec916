package tiered

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testkit/faultlayer"
	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
)

// joined waits until a caller other than the leader joined the execution of
// key and fingerprint fp in this process.
func joined(t *testing.T, s *Store, key idem.Key, fp string) {
	t.Helper()
	d := key.Digest()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := s.flights.calls.Find(flightHash(&d), flightKey{d, fp}); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no caller joined the execution")
		}
		time.Sleep(time.Millisecond)
	}
}

// A caller that joined an execution whose result was not stored — its
// completion still pending, or refused after a takeover — gets the error
// and not the leader's value: that value may never be the key's result,
// and a caller that took it for one would act on an answer another owner's
// contradicts.
func TestJoinedCallerNeverGetsAnUnstoredValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
		want error
	}{
		{"pending", fmt.Errorf("%w: completion refused", idem.ErrUnavailable), ErrPending},
		{"lease lost", idem.ErrLeaseLost, idem.ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql := faultlayer.New(must.Get(memlayer.New())(t))
			s, err := New(WithSQL(sql), WithLease(200*time.Millisecond), WithWait(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			k := idem.NewKey(t.Name(), "k")
			started, release := make(chan struct{}), make(chan struct{})
			fn := func(context.Context) ([]byte, error) {
				close(started)
				<-release
				return []byte("charged"), nil
			}
			leader := make(chan error, 1)
			go func() {
				r, err := s.Do(context.Background(), k, "fp", fn)
				if string(r.Value) != "charged" {
					err = fmt.Errorf("leader's value %q with %w", r.Value, err)
				}
				leader <- err
			}()
			<-started
			follower := make(chan struct {
				r   Result
				err error
			}, 1)
			go func() {
				r, err := s.Do(t.Context(), k, "fp", fn)
				follower <- struct {
					r   Result
					err error
				}{r, err}
			}()
			joined(t, s, k, "fp")
			sql.Fail(tc.fail, faultlayer.Complete)
			close(release)
			if err := <-leader; !errors.Is(err, tc.want) {
				t.Fatalf("leader: %v, want %v", err, tc.want)
			}
			got := <-follower
			if !errors.Is(got.err, tc.want) || got.r.Value != nil {
				t.Fatalf("follower: %q, %v; want no value and %v", got.r.Value, got.err, tc.want)
			}
		})
	}
}

// Calls whose keys share a slot of the table — the same key with other
// fingerprints, or other keys whose digests share the slot's bytes — are
// each their own execution, found and left in any order.
func TestFlightsSharedSlot(t *testing.T) {
	var a, b [idem.KeySize]byte
	a[0], b[0] = 1, 2 // the same slot bytes (8–15), other digests
	ka, kb := idem.KeyFromDigest(a), idem.KeyFromDigest(b)
	var f flights
	calls := []*call{
		{key: ka, fingerprint: "x"},
		{key: ka, fingerprint: "y"},
		{key: kb, fingerprint: "x"},
	}
	find := func(c *call) *call {
		d := c.key.Digest()
		cur, _ := f.calls.Find(flightHash(&d), flightKey{d, c.fingerprint})
		if cur == nil {
			return nil
		}
		return cur.Value
	}
	for _, c := range calls {
		if cur, lead := f.join(c, false); !lead || cur != c {
			t.Fatalf("%v %q joined %p, want a new execution", c.key, c.fingerprint, cur)
		}
	}
	if cur, lead := f.join(&call{key: ka, fingerprint: "x"}, false); lead || cur != calls[0] {
		t.Fatalf("a duplicate got %p, lead %v; want to join %p", cur, lead, calls[0])
	}
	inFlight := map[*call]bool{calls[0]: true, calls[1]: true, calls[2]: true}
	for _, c := range []*call{calls[1], calls[2], calls[0]} { // the middle, the head, the last
		f.leave(c)
		delete(inFlight, c)
		for _, other := range calls {
			cur := find(other)
			if inFlight[other] && cur != other || !inFlight[other] && cur != nil {
				t.Fatalf("after %q of %v left: %q of %v finds %p", c.fingerprint, c.key, other.fingerprint, other.key, cur)
			}
		}
	}
}
