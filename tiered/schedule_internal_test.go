package tiered

import (
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testkit/must"
	"github.com/idemkit/idem/memlayer"
)

// The queue of renewals stays in due order whatever order executions join
// it in, and the timer is armed for the earliest.
func TestRenewalsQueueInDueOrder(t *testing.T) {
	s, err := New(WithSQL(must.Get(memlayer.New())(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	q := &s.renewals
	base := time.Now().Add(time.Hour) // never due while the test runs
	rs := make([]*renewal, 5)
	for i, offset := range []int{3, 1, 4, 0, 2} { // joins out of order
		rs[i] = &renewal{due: base.Add(time.Duration(offset) * time.Second)}
		q.add(s, rs[i])
	}
	order := func() []time.Duration {
		q.mu.Lock()
		defer q.mu.Unlock()
		var got []time.Duration
		var prev *renewal
		for r := q.head; r != nil; prev, r = r, r.next {
			if r.prev != prev {
				t.Fatal("broken back link")
			}
			got = append(got, r.due.Sub(base)/time.Second)
		}
		if q.tail != prev {
			t.Fatal("tail is not the last")
		}
		return got
	}
	check := func(want ...time.Duration) {
		t.Helper()
		got := order()
		if len(got) != len(want) {
			t.Fatalf("queue %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("queue %v, want %v", got, want)
			}
		}
	}
	check(0, 1, 2, 3, 4)
	if !q.armed.Equal(base) {
		t.Fatalf("armed for %v, want the earliest due", q.armed.Sub(base))
	}
	for _, i := range []int{3, 2, 4} { // the head, the tail, the middle
		if !q.remove(rs[i]) {
			t.Fatalf("renewal %d was not queued", i)
		}
	}
	check(1, 3)
	if q.remove(rs[3]) {
		t.Fatal("removed twice")
	}
	q.remove(rs[0])
	q.remove(rs[1])
	check()
}
