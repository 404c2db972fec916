package tiered

import (
	"sync"
	"sync/atomic"
	"time"
)

// renewals starts the renewers of a Store's executions when their first
// renewal is due. Most work ends long before that (lease/3), so an
// execution only joins a queue ordered by due time and leaves it when fn
// returns: one timer for the whole Store, armed for the earliest due
// renewal, rather than a timer started and stopped (and three allocations)
// for every execution.
type renewals struct {
	mu         sync.Mutex  // guards the fields below and the queue links of every renewal
	head, tail *renewal    // the queued renewals, earliest due first
	timer      *time.Timer // made on first use; fires fire
	armed      time.Time   // when timer fires; zero when it is not armed
	// store is whom the timer fires for, until Close: the timer holds only
	// this, so that a stopped timer still in the runtime's heap until its
	// time does not keep a closed Store, and all it holds, alive.
	store *atomic.Pointer[Store]
}

// add queues r, whose first renewal is due at r.due.
func (q *renewals) add(s *Store, r *renewal) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Executions join mostly in the order they are due: look from the tail.
	at := q.tail
	for at != nil && at.due.After(r.due) {
		at = at.prev
	}
	r.prev = at
	if at == nil {
		r.next, q.head = q.head, r
	} else {
		r.next, at.next = at.next, r
	}
	if r.next == nil {
		q.tail = r
	} else {
		r.next.prev = r
	}
	r.queued = true
	// A timer armed for no later than r.due serves r too: it fires, and arms
	// itself again for what is then due first.
	if q.armed.IsZero() || r.due.Before(q.armed) {
		q.arm(s, r.due)
	}
}

// arm makes the timer fire at at. q.mu must be held.
func (q *renewals) arm(s *Store, at time.Time) {
	d := max(time.Until(at), 0)
	if q.timer == nil {
		ref := new(atomic.Pointer[Store])
		ref.Store(s)
		q.store = ref
		q.timer = time.AfterFunc(d, func() {
			if s := ref.Load(); s != nil {
				s.renewals.fire(s)
			}
		})
	} else {
		q.timer.Reset(d)
	}
	q.armed = at
}

// remove takes r out of the queue. It reports false when r was not queued:
// its renewer was started (or the Store closed first).
func (q *renewals) remove(r *renewal) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !r.queued {
		return false
	}
	q.unlink(r)
	return true
}

// unlink takes the queued r out of the queue. q.mu must be held.
func (q *renewals) unlink(r *renewal) {
	if r.prev == nil {
		q.head = r.next
	} else {
		r.prev.next = r.next
	}
	if r.next == nil {
		q.tail = r.prev
	} else {
		r.next.prev = r.prev
	}
	r.prev, r.next, r.queued = nil, nil, false
}

// fire starts the renewers that are due, each on a goroutine of its own, and
// arms the timer for the next. After Close it starts none and leaves the
// timer unarmed: the work is cancelled, and stop takes each renewal out.
func (q *renewals) fire(s *Store) {
	var due []*renewal
	q.mu.Lock()
	q.armed = time.Time{}
	if !s.closed.Load() {
		now := time.Now()
		for q.head != nil && !q.head.due.After(now) {
			r := q.head
			q.unlink(r)
			due = append(due, r)
		}
		if q.head != nil {
			q.arm(s, q.head.due)
		}
	}
	q.mu.Unlock()
	for _, r := range due {
		if s.track() {
			go r.run()
		}
	}
}

// stop stops the timer, for Close.
func (q *renewals) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
		q.store.Store(nil)
	}
	q.armed = time.Time{}
}
