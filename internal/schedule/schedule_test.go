package schedule

import (
	"testing"
	"time"
)

// The queue stays in due order whatever order items join it in, and the
// timer is armed for the earliest.
func TestQueueInDueOrder(t *testing.T) {
	q := New(func(int) { t.Error("an item started long before it was due") })
	t.Cleanup(q.Stop)
	base := time.Now().Add(time.Hour) // never due while the test runs
	items := make([]*Item[int], 5)
	for i, offset := range []int{3, 1, 4, 0, 2} { // joins out of order
		items[i] = &Item[int]{Due: base.Add(time.Duration(offset) * time.Second), Value: offset}
		q.Add(items[i])
	}
	order := func() []time.Duration {
		q.mu.Lock()
		defer q.mu.Unlock()
		var got []time.Duration
		var prev *Item[int]
		for it := q.head; it != nil; prev, it = it, it.next {
			if it.prev != prev {
				t.Fatal("broken back link")
			}
			got = append(got, it.Due.Sub(base)/time.Second)
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
		if !q.Remove(items[i]) {
			t.Fatalf("item %d was not queued", i)
		}
	}
	check(1, 3)
	if q.Remove(items[3]) {
		t.Fatal("removed twice")
	}
	q.Remove(items[0])
	q.Remove(items[1])
	check()
}

// Items start once each, when they fall due and in due order, and an item
// removed before it is due never starts.
func TestQueueStartsWhatFallsDue(t *testing.T) {
	started := make(chan int, 10)
	q := New(func(v int) { started <- v })
	t.Cleanup(q.Stop)
	now := time.Now()
	later := &Item[int]{Due: now.Add(time.Hour), Value: 9}
	removed := &Item[int]{Due: now.Add(20 * time.Millisecond), Value: 8}
	q.Add(later)
	q.Add(removed)
	q.Add(&Item[int]{Due: now.Add(10 * time.Millisecond), Value: 2})
	q.Add(&Item[int]{Due: now.Add(-time.Second), Value: 1}) // overdue: at once
	if !q.Remove(removed) {
		t.Fatal("an item not yet due was not queued")
	}
	for _, want := range []int{1, 2} {
		select {
		case v := <-started:
			if v != want {
				t.Fatalf("started %d, want %d", v, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("item %d never started", want)
		}
	}
	select {
	case v := <-started:
		t.Fatalf("started %d, which was removed or is not due", v)
	case <-time.After(50 * time.Millisecond):
	}
	if !q.Remove(later) {
		t.Fatal("the item not due was taken out")
	}
}

// After Stop nothing starts, an item added then stays queued for its owner
// to remove, and the timer no longer holds the queue.
func TestQueueStop(t *testing.T) {
	started := make(chan int, 10)
	q := New(func(v int) { started <- v })
	q.Add(&Item[int]{Due: time.Now().Add(20 * time.Millisecond), Value: 1})
	q.Stop()
	late := &Item[int]{Due: time.Now(), Value: 2}
	q.Add(late)
	select {
	case v := <-started:
		t.Fatalf("item %d started after Stop", v)
	case <-time.After(100 * time.Millisecond):
	}
	if !q.Remove(late) {
		t.Fatal("an item added after Stop was not queued")
	}
	if q.self.Load() != nil {
		t.Fatal("the stopped timer still holds the queue")
	}
}
